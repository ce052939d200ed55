package api

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/store"
)

// POST /feedback/sms: the SMS gateway's callbacks (Twilio's shape),
// signed with the account's auth token (X-Twilio-Signature). An inbound
// message of STOP (or UNSUBSCRIBE, CANCEL…) stops SMS to that number at
// once, for whoever gave it; START turns it on again. A message's status
// callback (every text carries StatusCallback = {origin}/feedback/sms)
// that says the number cannot take SMS (sms.RetireStatus: failed or
// undelivered with a permanent code) retires it, as a 21211 on sending
// does. Each change is made once per message and what it said: a
// replayed callback (Twilio's signature has no time in it) changes
// nothing within smsReplayWindow.

// maxSMSCallback bounds a callback's form: Twilio's are a few hundred
// bytes.
const maxSMSCallback = 16 << 10

// smsReplayWindow is how long a callback acted on is remembered against
// replay. Its keys are bounded by the callbacks that change a number:
// status callbacks at most the texts of the window (NEWSLETTER_SMS_PER_DAY
// a day), and the STOPs and STARTs the gateway passes on. Twilio retries
// a callback for minutes, not days.
const smsReplayWindow = 7 * 24 * time.Hour

// maxMessageSID bounds the SID in a replay key: Twilio's are 34
// characters (SM + 32 hex).
const maxMessageSID = 64

func (s *Server) smsRoutes() {
	if s.cfg.SMSAuthToken == "" {
		return
	}
	s.mux.HandleFunc("POST /feedback/sms", s.smsFeedback)
}

// smsFeedback handles POST /feedback/sms. A request not signed with the
// account's token over this URL: 403, nothing changed. A callback that
// would change a number without a MessageSid: 400, nothing changed. The
// answer is an empty TwiML response: the gateway sends its own STOP/START
// replies (see docs/channels.md for a short code).
func (s *Server) smsFeedback(w http.ResponseWriter, r *http.Request) {
	if err := httpbody.Limit(w, r, maxSMSCallback); err != nil {
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody("callback too large"))
		return
	}
	if err := r.ParseForm(); err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody("unreadable form"))
		return
	}
	// Twilio signs the URL it was given: the public one, with the query.
	full := s.cfg.Origin + r.URL.RequestURI()
	if !sms.ValidSignature(s.cfg.SMSAuthToken, full, r.PostForm, r.Header.Get(sms.SignatureHeader)) {
		webjson.Write(w, http.StatusForbidden, errorBody("not signed by the SMS gateway's account"))
		return
	}
	number, state, err := smsCallbackChange(r.PostForm)
	if state != "" && err == nil {
		sid := r.PostForm.Get("MessageSid")
		if sid == "" || len(sid) > maxMessageSID {
			webjson.Write(w, http.StatusBadRequest, errorBody("want the callback's MessageSid"))
			return
		}
		if !s.applySMSCallback(w, r, sid+":"+state, number, state) {
			return
		}
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Response></Response>`)) // the gateway retries what it did not get
}

// smsCallbackChange reads what a callback says of a number: the number
// and its new state ("" : nothing to change), or an error when the number
// does not parse.
func smsCallbackChange(form url.Values) (number, state string, err error) {
	switch {
	case form.Has("Body"): // an inbound message
		switch sms.Keyword(form.Get("Body")) {
		case sms.OptOut:
			state = store.NumberStopped
		case sms.OptIn:
			state = store.NumberOn
		default:
			return "", "", nil
		}
		number, err = phone.Parse(form.Get("From"), "")
	case sms.RetireStatus(form.Get("MessageStatus"), form.Get("ErrorCode")): // a status callback
		state = store.NumberRetired
		number, err = phone.Parse(form.Get("To"), "")
	}
	return number, state, err
}

// applySMSCallback sets number's state once per key (the message and the
// state): a replay is answered as the first was and changes nothing. The
// change is made before it is remembered, so a fault may let one replay
// through but never loses a STOP. It answers false after writing a 503
// (the gateway calls again).
func (s *Server) applySMSCallback(w http.ResponseWriter, r *http.Request, key, number, state string) bool {
	ctx := r.Context()
	end := number[max(0, len(number)-3):]
	seen, err := s.deps.Store.SMSCallbackSeen(ctx, key)
	if err == nil && seen {
		s.deps.Log.Info("sms: a callback seen before, not applied again", "state", state, "number_end", end)
		return true
	}
	if err == nil {
		err = s.deps.Store.SetNumberState(ctx, number, state)
	}
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not record it, please retry"))
		return false
	}
	if err := s.deps.Store.RememberSMSCallback(context.Background(), key, smsReplayWindow); err != nil {
		// The change stands; only this callback's replay is not refused.
		s.deps.Log.Warn("sms: a callback applied but not remembered against replay", "err", err)
	}
	s.deps.Log.Info("sms: a number's state", "state", state, "number_end", end)
	return true
}
