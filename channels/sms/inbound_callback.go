package sms

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/internal/webjson"
)

// CallbackPath is where the gateway's callbacks come in (POST): every
// text carries StatusCallback = {origin}/feedback/sms, and the account's
// inbound messages are pointed there.
const CallbackPath = "/feedback/sms"

// maxCallback bounds a callback's form: Twilio's are a few hundred bytes.
const maxCallback = 16 << 10

// replayWindow is how long a callback acted on is remembered against
// replay. Its keys are bounded by the callbacks that change a number:
// status callbacks at most the texts of the window (NEWSLETTER_SMS_PER_DAY
// a day), and the STOPs and STARTs the gateway passes on. Twilio retries
// a callback for minutes, not days.
const replayWindow = 7 * 24 * time.Hour

// maxMessageSID bounds the SID in a replay key: Twilio's are 34
// characters (SM + 32 hex).
const maxMessageSID = 64

// CallbackStore keeps the numbers' states and the callbacks acted on
// (store.Phones).
type CallbackStore interface {
	SetNumberState(ctx context.Context, number, state string) error
	// SMSCallbackSeen tells whether a callback's key was acted on;
	// RememberSMSCallback records it, for ttl, once it was.
	SMSCallbackSeen(ctx context.Context, key string) (bool, error)
	RememberSMSCallback(ctx context.Context, key string, ttl time.Duration) error
}

// NumberStates are the store's names of the states a callback sets
// (store.NumberStopped, store.NumberOn, store.NumberRetired).
type NumberStates struct {
	Stopped, On, Retired string
}

// CallbackHandler is POST /feedback/sms: the gateway's callbacks
// (Twilio's shape), signed with the account's auth token
// (X-Twilio-Signature). An inbound message of STOP (or UNSUBSCRIBE,
// CANCEL…) stops SMS to that number at once, for whoever gave it; START
// turns it on again. A message's status callback that says the number
// cannot take SMS (RetireStatus: failed or undelivered with a permanent
// code) retires it, as a 21211 on sending does. Each change is made once
// per message and what it said: a replayed callback (Twilio's signature
// has no time in it) changes nothing within replayWindow.
//
// Its guards are all here: the body cap (maxCallback), the signature over
// the public URL, and the replay keys.
type CallbackHandler struct {
	// AuthToken is the account's (NEWSLETTER_SMS_AUTH_TOKEN).
	AuthToken string
	// Origin is the service's public origin (NEWSLETTER_BASE_URL):
	// Twilio signs the URL it was given, not the one a proxy passes on.
	Origin string
	Store  CallbackStore
	States NumberStates
	Log    *slog.Logger // nil: slog.Default()
}

// ServeHTTP handles a callback. A request not signed with the account's
// token over this URL: 403, nothing changed. A callback that would change
// a number without a MessageSid: 400, nothing changed. The answer is an
// empty TwiML response: the gateway sends its own STOP/START replies
// (see docs/channels.md for a short code).
func (h *CallbackHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := httpbody.Limit(w, r, maxCallback); err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "callback too large")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "unreadable form")
		return
	}
	// Twilio signs the URL it was given: the public one, with the query.
	full := h.Origin + r.URL.RequestURI()
	if !ValidSignature(h.AuthToken, full, r.PostForm, r.Header.Get(SignatureHeader)) {
		writeError(w, http.StatusForbidden, "not signed by the SMS gateway's account")
		return
	}
	number, state, err := h.change(r.PostForm)
	if state != "" && err == nil {
		sid := r.PostForm.Get("MessageSid")
		if sid == "" || len(sid) > maxMessageSID {
			writeError(w, http.StatusBadRequest, "want the callback's MessageSid")
			return
		}
		if !h.apply(w, r, sid+":"+state, number, state) {
			return
		}
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Response></Response>`)) // the gateway retries what it did not get
}

// writeError answers the API's JSON error body: the callback route is
// mounted on the API's server.
func writeError(w http.ResponseWriter, code int, msg string) {
	webjson.Write(w, code, map[string]string{"error": msg})
}

// change reads what a callback says of a number: the number and its new
// state ("" : nothing to change), or an error when the number does not
// parse.
func (h *CallbackHandler) change(form url.Values) (number, state string, err error) {
	switch {
	case form.Has("Body"): // an inbound message
		switch Keyword(form.Get("Body")) {
		case OptOut:
			state = h.States.Stopped
		case OptIn:
			state = h.States.On
		default:
			return "", "", nil
		}
		number, err = phone.Parse(form.Get("From"), "")
	case RetireStatus(form.Get("MessageStatus"), form.Get("ErrorCode")): // a status callback
		state = h.States.Retired
		number, err = phone.Parse(form.Get("To"), "")
	}
	return number, state, err
}

// apply sets number's state once per key (the message and the state): a
// replay is answered as the first was and changes nothing. The change is
// made before it is remembered, so a fault may let one replay through but
// never loses a STOP. It answers false after writing a 503 (the gateway
// calls again).
func (h *CallbackHandler) apply(w http.ResponseWriter, r *http.Request, key, number, state string) bool {
	ctx := r.Context()
	end := number[max(0, len(number)-3):]
	seen, err := h.Store.SMSCallbackSeen(ctx, key)
	if err == nil && seen {
		h.log().Info("sms: a callback seen before, not applied again", "state", state, "number_end", end)
		return true
	}
	if err == nil {
		err = h.Store.SetNumberState(ctx, number, state)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "could not record it, please retry")
		return false
	}
	if err := h.Store.RememberSMSCallback(context.Background(), key, replayWindow); err != nil {
		// The change stands; only this callback's replay is not refused.
		h.log().Warn("sms: a callback applied but not remembered against replay", "err", err)
	}
	h.log().Info("sms: a number's state", "state", state, "number_end", end)
	return true
}

func (h *CallbackHandler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
