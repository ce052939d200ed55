package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// settingsFields are PUT /api/settings's: any of them (an absent one
// keeps its value), and the version the writer read.
var settingsFields = fields{"name": textField, "description": textField, "from": textField, "reply_to": textField,
	"postal_address": textField, "logo_url": textField, "accent": textField,
	"confirmed_heading": textField, "confirmed_text": textField, "confirmed_url": textField, "test_recipients": listField,
	"version": countField}

func (s *Server) settingsRoutes() {
	if s.deps.SettingsStore == nil {
		return
	}
	s.mux.Handle("GET /api/settings", s.Admin(http.HandlerFunc(s.getSettings)))
	s.mux.Handle("PUT /api/settings", s.Admin(http.HandlerFunc(s.putSettings)))
}

// newsletter are the settings in effect (the name on pages, feeds and
// texts).
func (s *Server) newsletter(r *http.Request) store.Settings {
	return s.deps.Settings.Current(r.Context())
}

// getSettings handles GET /api/settings: the settings in effect (version
// 0: none saved, derived from the environment).
func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) {
	cur, err := s.storedSettings(r)
	if err != nil {
		s.deps.Log.Error("read the settings", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not read the settings"))
		return
	}
	webjson.Write(w, http.StatusOK, cur)
}

// storedSettings reads the settings from the store itself (not the
// cache: a writer must see the version it would overwrite).
func (s *Server) storedSettings(r *http.Request) (store.Settings, error) {
	cur, err := s.deps.SettingsStore.Settings(r.Context())
	if err != nil || cur.Version > 0 {
		return cur, err
	}
	return s.deps.Settings.Defaults(), nil
}

// putSettings handles PUT /api/settings: the given fields over the saved
// ones, checked whole (400, nothing changed), saved when "version" (when
// given) is still the saved one (409 otherwise), audited, and in effect
// in this process at once and in the others within settings.DefaultRecheck.
func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, settingsFields, false)
	if in == nil {
		return
	}
	cur, err := s.storedSettings(r)
	if err != nil {
		s.deps.Log.Error("read the settings", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not read the settings"))
		return
	}
	version := cur.Version
	if v, ok := in["version"]; ok {
		version, _ = strconv.ParseInt(v[0], 10, 64) // a countField: checked
	}
	next := cur
	for name, f := range map[string]*string{"name": &next.Name, "description": &next.Description, "from": &next.From,
		"reply_to": &next.ReplyTo, "postal_address": &next.PostalAddress, "logo_url": &next.LogoURL, "accent": &next.Accent,
		"confirmed_heading": &next.ConfirmedHeading, "confirmed_text": &next.ConfirmedText, "confirmed_url": &next.ConfirmedURL} {
		if v, ok := in[name]; ok {
			*f = v[0]
		}
	}
	if v, ok := in["test_recipients"]; ok {
		next.TestRecipients = v
	}
	saved, err := settings.Save(r.Context(), s.deps.SettingsStore, s.deps.Settings, s.cfg.DKIMDomain, cur, next, version)
	var bad *settings.Error
	switch {
	case errors.As(err, &bad):
		webjson.Write(w, http.StatusBadRequest, map[string]string{"error": bad.Error(), "field": bad.Field})
		return
	case errors.Is(err, store.ErrSettingsStale):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
		return
	case err != nil:
		s.deps.Log.Error("save the settings", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not save the settings"))
		return
	}
	s.note(r, audit.SettingsChanged, "settings", settings.Changed(cur, saved))
	webjson.Write(w, http.StatusOK, saved)
}
