package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// saveSettings is POST /admin/settings: as PUT /api/settings (one
// settings.Save), with the form shown again, as typed, on a refusal.
func (h *Handler) saveSettings(w http.ResponseWriter, r *http.Request) {
	if h.d.SettingsStore == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "The settings are not served on this deployment.")
		return
	}
	f, err := form.NewSettings(w, r)
	if err != nil {
		h.settingsPage(w, r, form.Status(err), f, err.Error())
		return
	}
	cur, err := h.storedSettings(r)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	saved, err := settings.Save(r.Context(), h.d.SettingsStore, h.d.Settings, h.cfg.DKIMDomain, cur, f, f.Version)
	var bad *settings.Error
	switch {
	case errors.As(err, &bad):
		h.settingsPage(w, r, http.StatusBadRequest, f, bad.Error())
		return
	case errors.Is(err, store.ErrSettingsStale):
		// What was typed stays in the form, at the version saved now, so
		// a second save is a decision, not an accident.
		f.Version = cur.Version
		h.settingsPage(w, r, http.StatusConflict, f, "The settings changed since you opened this page; nothing was saved. Your values are below: compare and save again.")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SettingsChanged, "settings", settings.Changed(cur, saved))
	done(w, r, "/admin/settings", "saved")
}
