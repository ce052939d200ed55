package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

type settingsData struct {
	// Form is what the form shows: the saved settings, or what was
	// typed when a save was refused.
	Form store.Settings
	// DKIMDomain is the domain a From must be at ("" : no DKIM).
	DKIMDomain    string
	RequirePostal bool
}

// MaxTestRecipients is the most addresses of the team's test list.
func (settingsData) MaxTestRecipients() int { return settings.MaxTestRecipients }

// showSettings is GET /admin/settings.
func (h *Handler) showSettings(w http.ResponseWriter, r *http.Request) {
	if h.d.SettingsStore == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "The settings are not served on this deployment.")
		return
	}
	cur, err := h.storedSettings(r)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.settingsPage(w, r, http.StatusOK, cur, "")
}

// storedSettings are the saved settings, or the environment's while none
// are saved (version 0).
func (h *Handler) storedSettings(r *http.Request) (store.Settings, error) {
	cur, err := h.d.SettingsStore.Settings(r.Context())
	if err != nil || cur.Version > 0 {
		return cur, err
	}
	return h.d.Settings.Defaults(), nil
}

func (h *Handler) settingsPage(w http.ResponseWriter, r *http.Request, code int, f store.Settings, problem string) {
	h.render(w, r, code, "settings", page{Title: "Settings", Section: "settings", Error: problem,
		Data: settingsData{Form: f, DKIMDomain: h.cfg.DKIMDomain, RequirePostal: h.d.Settings.RequiresPostal()}})
}

// newsletterName is the newsletter's name in effect (the authenticator
// app lists the console's accounts under it).
func (h *Handler) newsletterName(r *http.Request) string {
	return h.d.Settings.Current(r.Context()).Name
}
