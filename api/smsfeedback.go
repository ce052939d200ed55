package api

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/sms"
	"github.com/newsletter/newsletter/store"
)

// POST /feedback/sms: the SMS gateway's callbacks (Twilio's shape),
// signed with the account's auth token (X-Twilio-Signature). An inbound
// message of STOP (or UNSUBSCRIBE, CANCEL…) stops SMS to that number at
// once, for whoever gave it; START turns it on again. A delivery status
// that says the number cannot take SMS retires it, as a 21211 on sending
// does.

// maxSMSCallback bounds a callback's form: Twilio's are a few hundred
// bytes.
const maxSMSCallback = 16 << 10

// smsRetireCodes are the delivery statuses' error codes that say a number
// cannot take SMS (30003 unreachable, 30005 unknown, 30006 a landline).
var smsRetireCodes = map[string]bool{"30003": true, "30005": true, "30006": true}

func (s *Server) smsRoutes() {
	if s.cfg.SMSAuthToken == "" {
		return
	}
	s.mux.HandleFunc("POST /feedback/sms", s.smsFeedback)
}

// smsFeedback handles POST /feedback/sms. A request not signed with the
// account's token over this URL: 403, nothing changed. The answer is an
// empty TwiML response: the gateway sends its own STOP/START replies.
func (s *Server) smsFeedback(w http.ResponseWriter, r *http.Request) {
	if err := httpbody.Limit(w, r, maxSMSCallback); err != nil {
		WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody("callback too large"))
		return
	}
	if err := r.ParseForm(); err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody("unreadable form"))
		return
	}
	// Twilio signs the URL it was given: the public one, with the query.
	full := s.cfg.Origin + r.URL.RequestURI()
	if !sms.ValidSignature(s.cfg.SMSAuthToken, full, r.PostForm, r.Header.Get(sms.SignatureHeader)) {
		WriteJSON(w, http.StatusForbidden, errorBody("not signed by the SMS gateway's account"))
		return
	}
	from, err := sms.ParseNumber(r.PostForm.Get("From"), "")
	state := ""
	switch {
	case r.PostForm.Has("Body"): // an inbound message
		switch sms.Keyword(r.PostForm.Get("Body")) {
		case sms.OptOut:
			state = store.NumberStopped
		case sms.OptIn:
			state = store.NumberOn
		}
	case smsRetireCodes[r.PostForm.Get("ErrorCode")]: // a delivery status
		from, err = sms.ParseNumber(r.PostForm.Get("To"), "")
		state = store.NumberRetired
	}
	if state != "" && err == nil {
		if err := s.deps.Store.SetNumberState(r.Context(), from, state); err != nil {
			// The gateway calls again on a 5xx.
			WriteJSON(w, http.StatusServiceUnavailable, errorBody("could not record it, please retry"))
			return
		}
		s.deps.Log.Info("sms: a number's state", "state", state, "number_end", from[max(0, len(from)-3):])
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Response></Response>`)) // the gateway retries what it did not get
}
