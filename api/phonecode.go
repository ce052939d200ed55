package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// A person gives their own number in the preference centre: it is theirs
// for texts once they enter the code texted to it (POST /preferences/phone,
// then POST /preferences/phone/confirm). Texts themselves are then ticked
// per topic.

// smsOffer is the page's "Text messages" section.
type smsOffer struct {
	Number  string // the person's number, its last digits only ("" : none)
	Stopped bool   // it replied STOP
	Pending string // a number a code was texted to, waiting ("" : none)
}

// smsOn tells whether SMS is configured.
func (s *Server) smsOn() bool { return s.cfg.SMSAuthToken != "" }

func (s *Server) smsOffer(ctx context.Context, sub store.Subscriber, p store.Phone) (*smsOffer, error) {
	o := &smsOffer{}
	if p.Number != "" {
		o.Number, o.Stopped = maskNumber(p.Number), p.State == store.NumberStopped
		return o, nil
	}
	pending, err := s.deps.Store.PendingPhoneCode(ctx, sub.ID)
	if pending != "" {
		o.Pending = maskNumber(pending)
	}
	return o, err
}

func (s *Server) phoneCodeRoutes() {
	if !s.smsOn() {
		return
	}
	s.mux.HandleFunc("POST /preferences/phone", s.preferencesPhone)
	s.mux.HandleFunc("POST /preferences/phone/confirm", s.preferencesPhoneConfirm)
}

// preferencesPhone handles POST /preferences/phone: token and phone texts
// a code to the number (one a minute at most); token and remove=1 takes
// the person's number away. A number that does not parse, is not a
// mobile, or is of a country not in NEWSLETTER_SMS_COUNTRIES: 400 with the
// page and the reason, nothing stored, nothing texted. A client address
// past its codes for the hour: 429, the same.
func (s *Server) preferencesPhone(w http.ResponseWriter, r *http.Request) {
	in, tok, _, sub, ok := s.preferencesPost(w, r, phoneFormFields)
	if !ok {
		return
	}
	if sub.Status != store.Active {
		s.ended(w, sub.Email)
		return
	}
	ctx := r.Context()
	if in.get("remove") == "1" {
		if err := s.deps.Store.DeletePhone(ctx, sub.ID); err != nil && !errors.Is(err, store.ErrNoPhone) {
			fail(w, r, http.StatusServiceUnavailable, "we could not remove your number just now, please try again")
			return
		}
		s.renderPreferences(w, r, http.StatusOK, tok, sub, "Your number is removed: we send you no more texts.")
		return
	}
	number, err := s.textableNumber(in.get("phone"))
	if err != nil {
		s.renderPreferences(w, r, http.StatusBadRequest, tok, sub, "", err.Error())
		return
	}
	if ok, wait := s.texting.Allow(s.cfg.Clients.Key(r)); !ok {
		s.deps.Checks.SMSCodeCapped()
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		s.renderPreferences(w, r, http.StatusTooManyRequests, tok, sub, "", "Too many codes were texted from your address: try again later.")
		return
	}
	code, err := newCode()
	if err != nil {
		fail(w, r, http.StatusServiceUnavailable, "we could not text you a code just now, please try again")
		return
	}
	switch err := s.deps.Store.StartPhoneCode(ctx, sub.ID, number, code); {
	case errors.Is(err, store.ErrCodeTooSoon):
		s.renderPreferences(w, r, http.StatusTooManyRequests, tok, sub, "", "We texted you a code less than a minute ago: wait a moment before asking again.")
		return
	case err != nil:
		fail(w, r, http.StatusServiceUnavailable, "we could not text you a code just now, please try again")
		return
	}
	job := tasks.NewSMSCode(tasks.SMSCodePayload{SubscriberID: sub.ID, Number: number, Code: code,
		Text:  fmt.Sprintf("%s: your code is %s. It works for %d minutes.", s.newsletter(r).Name, code, int(store.PhoneCodeTTL.Minutes())),
		Until: s.deps.Now().Add(store.PhoneCodeTTL)})
	if _, err := s.deps.Queue.EnqueueContext(ctx, job); err != nil {
		s.deps.Log.Error("preferences: queue a phone code", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not text you a code just now, please try again")
		return
	}
	s.renderPreferences(w, r, http.StatusOK, tok, sub, "We texted a code to "+maskNumber(number)+": enter it below.")
}

// preferencesPhoneConfirm handles POST /preferences/phone/confirm: the
// code texted to the number makes it the person's (consent source
// "preference centre", with the SID of the message that carried the
// code). A wrong code: 400, and a few tries spend it; none waiting: 400;
// one whose text the gateway has not taken yet: 409, the code unchecked
// (a guess then learns nothing, and costs no try).
func (s *Server) preferencesPhoneConfirm(w http.ResponseWriter, r *http.Request) {
	in, tok, _, sub, ok := s.preferencesPost(w, r, phoneCodeFields)
	if !ok {
		return
	}
	if sub.Status != store.Active {
		s.ended(w, sub.Email)
		return
	}
	ctx := r.Context()
	number, messageSID, err := s.deps.Store.CheckPhoneCode(ctx, sub.ID, strings.TrimSpace(in.get("code")))
	switch {
	case errors.Is(err, store.ErrCodeNotSent):
		s.renderPreferences(w, r, http.StatusConflict, tok, sub, "", "Your code's text has not gone out yet: wait for it, then enter it.")
		return
	case errors.Is(err, store.ErrWrongCode):
		s.renderPreferences(w, r, http.StatusBadRequest, tok, sub, "", "That is not the code we texted: try again.")
		return
	case errors.Is(err, store.ErrNoCode):
		s.renderPreferences(w, r, http.StatusBadRequest, tok, sub, "", "No code is waiting (it ends after 10 minutes or 5 tries): ask for a new one.")
		return
	case err != nil:
		fail(w, r, http.StatusServiceUnavailable, "we could not check your code just now, please try again")
		return
	}
	if _, err := s.deps.Store.SetPhone(ctx, sub.ID, number, "preference centre (texted code, message "+cmp.Or(messageSID, "SID unread")+")"); err != nil {
		fail(w, r, http.StatusServiceUnavailable, "we could not save your number just now, please try again")
		return
	}
	s.renderPreferences(w, r, http.StatusOK, tok, sub, "Your number is saved. Tick Text message under the topics you want by text.")
}

// textableNumber is the number a person or the product backend gave, in
// E.164, when texts may go to it: a mobile (phone.Parse) of one of
// the countries texts are for.
func (s *Server) textableNumber(raw string) (string, error) {
	number, err := phone.Parse(raw, "")
	if err != nil {
		return "", err
	}
	if !s.cfg.SMSCountries.Allows(number) {
		return "", s.cfg.SMSCountries.NotAllowed(number)
	}
	return number, nil
}

// newCode is a six-digit code from the system's random source.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}
