package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/webhooks"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// subscribe handles POST /subscribe: validate, write the subscriber and its
// outbox entry in one step, then enqueue. An enqueue failure still answers
// 202: the subscription is saved and the relay will enqueue the mail.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request) {
	if s.limiter != nil {
		if ok, wait := s.limiter.Allow(s.cfg.Clients.Key(r)); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			fail(w, r, http.StatusTooManyRequests, "too many signups from your address, try again in a minute")
			return
		}
	}
	in, ok := s.readForm(w, r, subscribeFields)
	if !ok {
		return
	}
	// The form's hidden honeypot: people leave it empty, form-filling
	// bots do not. They get the answer a person gets, and nothing else.
	if in.get("website") != "" {
		s.deps.Metrics.Honeypot.Inc()
		s.accepted(w, r, "", !s.cfg.DoubleOptIn)
		return
	}
	req, ok := s.signupRequest(w, r, in)
	if !ok {
		return
	}
	email := req.Email
	now := s.deps.Now()
	confirmation := tasks.NewConfirm(email, now)
	job := confirmation
	if !s.cfg.DoubleOptIn {
		job = s.firstStep(email, now)
	}
	req.Outbox = job.Outbox()
	ctx := r.Context()
	sub, err := s.deps.Store.Subscribe(ctx, req)
	if errors.Is(err, store.ErrSuppressed) && req.Activate {
		// The address bounced or complained: a signup never lifts that,
		// double opt-in or not. Only the person's own confirmation does,
		// so it gets one (at most one a month, the store sees to it).
		req.Activate, req.Outbox, job = false, confirmation.Outbox(), confirmation
		sub, err = s.deps.Store.Subscribe(ctx, req)
	}
	if errors.Is(err, store.ErrConfirmHeld) || errors.Is(err, store.ErrSuppressed) {
		// A confirmation went to this mailbox recently (or this month,
		// when the address is suppressed): this request is answered as
		// any other (nothing tells whether the address is on the list)
		// and sends nothing. Someone using our form against a victim's
		// inbox gets one mail through, not fifty, whatever spelling of
		// the address they use.
		s.deps.Log.Info("subscribe: confirmation held", "task", job.ID)
		s.accepted(w, r, email, !s.cfg.DoubleOptIn)
		return
	}
	if errors.Is(err, store.ErrAlreadyActive) {
		fail(w, r, http.StatusConflict, "this address is already subscribed")
		return
	}
	if err != nil {
		s.deps.Log.Error("subscribe: store", "err", err)
		// The write may have landed before Redis stopped answering; a
		// second signup is safe (it finds the address and re-sends at
		// most one confirmation), so say so.
		fail(w, r, http.StatusServiceUnavailable, "we could not confirm your subscription was saved; subscribing again is safe")
		return
	}
	s.dispatchSignup(ctx, job)
	if req.Activate && sub.Status == store.Active {
		// Without double opt-in the signup is the confirmation.
		s.deps.Notify.NotifyLogged(ctx, webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, sub, ""))
	}
	s.accepted(w, r, email, !s.cfg.DoubleOptIn)
}

// signupRequest is the signup form checked, as the store takes it (the
// outbox is the caller's); a form it refuses is answered here.
func (s *Server) signupRequest(w http.ResponseWriter, r *http.Request, in input) (store.SubscribeRequest, bool) {
	email, err := address.Normalize(in.get("email"))
	if err != nil {
		s.refuseSignup(w, r, in, "please enter a valid e-mail address")
		return store.SubscribeRequest{}, false
	}
	name, tz, err := profile(in)
	if err != nil {
		s.refuseSignup(w, r, in, err.Error())
		return store.SubscribeRequest{}, false
	}
	chosen, err := s.chosenTopics(in)
	if err != nil {
		s.refuseSignup(w, r, in, err.Error())
		return store.SubscribeRequest{}, false
	}
	// The consent's source: the signup form, or a program posting JSON.
	source := store.SourceForm
	if wantsJSON(r) {
		source = store.SourceAPI
	}
	return store.SubscribeRequest{
		Email: email, Name: name, Timezone: tz, Activate: !s.cfg.DoubleOptIn,
		Hold: s.cfg.ConfirmHold, Topics: chosen, Source: source,
	}, true
}

// accepted is the 202 of a signup, the same whatever happened behind it.
func (s *Server) accepted(w http.ResponseWriter, r *http.Request, email string, active bool) {
	status := "pending"
	if active {
		status = "active"
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusAccepted, map[string]string{"email": email, "status": status})
		return
	}
	if !active {
		message(w, http.StatusAccepted, "Check your inbox",
			"We sent a confirmation link to "+email+". Open it to start your subscription.",
			"No mail after a few minutes? Look in the spam folder, or subscribe again to get a new link.")
		return
	}
	message(w, http.StatusAccepted, "You are subscribed", "Welcome! A first mail to "+email+" is on its way.")
}

// profile reads and checks the name and time zone fields.
func profile(in input) (name, tz string, err error) {
	if name, err = address.CheckName(in.get("name")); err != nil {
		return "", "", err
	}
	tz = strings.TrimSpace(in.get("timezone"))
	if tz != "" {
		if _, err := time.LoadLocation(tz); err != nil || strings.ContainsAny(tz, "\r\n") {
			return "", "", errors.New("unknown time zone, use a name like Europe/Berlin")
		}
	}
	return name, tz, nil
}

// chosenTopics reads the topics field: a form's ticked boxes or a JSON
// list. A body without the field (an API client from before topics) gets
// the default ones; our form always says it showed the boxes, so ticking
// none is an answer. Unknown ids and no topic at all are refused.
func (s *Server) chosenTopics(in input) ([]string, error) {
	ids, given := in["topics"]
	// A topic the newsletter assigns (not public) is neither given by
	// default nor taken here, however the request was made.
	chosen := s.cfg.Topics.Current().SignupDefaults()
	if given || in.get("topics_shown") != "" {
		var err error
		if chosen, err = s.cfg.Topics.Current().CheckSignup(ids); err != nil {
			return nil, err
		}
	}
	if len(chosen) == 0 {
		return nil, errors.New("choose at least one topic")
	}
	return chosen, nil
}

// refuseSignup answers a signup with bad fields: 400, and for a browser
// the form again with the message and the boxes as they were ticked.
func (s *Server) refuseSignup(w http.ResponseWriter, r *http.Request, in input, msg string) {
	if wantsJSON(r) {
		fail(w, r, http.StatusBadRequest, msg)
		return
	}
	ticked := in["topics"]
	if in.get("topics_shown") == "" {
		ticked = s.cfg.Topics.Current().SignupDefaults()
	}
	renderPage(w, http.StatusBadRequest, "form", pageData{Title: "Subscribe", Error: msg, Email: in.get("email"), Topics: s.signupChoices(ticked), Newsletter: s.newsletter(r)})
}

// dispatchSignup enqueues the signup's first mail
// (subscribers.Service.DispatchSignup: a hand-added person's goes the
// same way).
func (s *Server) dispatchSignup(ctx context.Context, job tasks.Job) { s.subs.DispatchSignup(ctx, job) }

// firstStep is the sequence's first step for email, confirmed now
// (subscribers.Service.FirstStep).
func (s *Server) firstStep(email string, now time.Time) tasks.Job {
	return s.subs.FirstStep(email, now)
}
