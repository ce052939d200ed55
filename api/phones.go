package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// A person's number for SMS, given by the product backend with the
// consent it recorded (editor). The number's STOP and START are the
// number's own (POST /feedback/sms).

var phoneFields = fields{"phone": textField, "consent_source": textField}

// maxConsentSource bounds the recorded consent source.
const maxConsentSource = 200

func (s *Server) phoneRoutes() {
	s.mux.Handle("PUT /api/subscribers/{email}/phone", s.Editor(http.HandlerFunc(s.putPhone)))
	s.mux.Handle("DELETE /api/subscribers/{email}/phone", s.Editor(http.HandlerFunc(s.deletePhone)))
}

// putPhone handles PUT /api/subscribers/{email}/phone
// {"phone":"+44 7400 123456","consent_source":"…"}: 200 with the number
// as stored (E.164) and its state. A number that does not parse, is not
// in international form, is not a mobile (a landline, premium-rate,
// VoIP…), is of a country not in NEWSLETTER_SMS_COUNTRIES, or no consent
// source: 400 with the reason; a person not active:
// 409; nothing is stored.
func (s *Server) putPhone(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, phoneFields, false)
	if in == nil {
		return
	}
	source := strings.TrimSpace(in.get("consent_source"))
	if source == "" || !utf8.ValidString(source) || len(source) > maxConsentSource || strings.ContainsAny(source, "\r\n") {
		webjson.Write(w, http.StatusBadRequest, errorBody(`want "consent_source": where the person agreed to SMS (one line, at most 200 bytes), recorded with the number`))
		return
	}
	number, err := s.textableNumber(in.get("phone"))
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	sub, ok := s.activeSubscriber(w, r, email)
	if !ok {
		return
	}
	p, err := s.deps.Store.SetPhone(r.Context(), sub.ID, number, source)
	switch {
	case errors.Is(err, store.ErrNotActive):
		webjson.Write(w, http.StatusConflict, errorBody(email+" is not an active subscriber"))
		return
	case errors.Is(err, store.ErrNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	case err != nil:
		s.deps.Log.Error("phones: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the number, please retry"))
		return
	}
	s.noteSubscriber(r, audit.PhoneSet, email, "consent: "+source)
	webjson.Write(w, http.StatusOK, p)
}

// deletePhone handles DELETE /api/subscribers/{email}/phone: 204, or 404
// when the person has none.
func (s *Server) deletePhone(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	sub, ok := s.subscriber(w, r, email)
	if !ok {
		return
	}
	err := s.deps.Store.DeletePhone(r.Context(), sub.ID)
	switch {
	case errors.Is(err, store.ErrNoPhone):
		webjson.Write(w, http.StatusNotFound, errorBody(email+" has no phone number"))
		return
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	s.noteSubscriber(r, audit.PhoneRemoved, email, "")
	w.WriteHeader(http.StatusNoContent)
}
