package subscribers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Owning the list: adding a person by hand and changing one
// (docs/publishing.md), the same from the API and the console.

// AuditSubscriberAdded is the audit action of a person added by hand.
const AuditSubscriberAdded = "subscriber.added"

// checkTimezone refuses a zone Go does not know.
func checkTimezone(tz string) (string, error) {
	tz = strings.TrimSpace(tz)
	if tz == "" {
		return "", nil
	}
	if _, err := time.LoadLocation(tz); err != nil || strings.ContainsFunc(tz, unicode.IsControl) {
		return "", bad("unknown time zone %q: use a name like Europe/Berlin", tz)
	}
	return tz, nil
}

// checkReason refuses a reason with control characters or too long.
func checkReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if len(reason) > MaxReason || strings.ContainsFunc(reason, unicode.IsControl) {
		return "", bad("reason: at most %d characters on one line", MaxReason)
	}
	return reason, nil
}

// actor is who makes the request (the consent record's and the jobs'
// actor).
func actor(ctx context.Context) (name, role string) {
	if p, ok := adminauth.FromContext(ctx); ok {
		return p.Name, string(p.Role)
	}
	return "unknown", ""
}

// AddSubscriber adds a person by hand. With double opt-in they are
// pending and get the confirmation, as from the signup form; without,
// they are active at once and the reason and the actor are kept in their
// consent record. Someone already on the list, suppressed or erased is
// refused (409) with why; nothing changes.
func (s *Service) AddSubscriber(ctx context.Context, in AddInput) (store.Subscriber, error) {
	email, err := address.Normalize(in.Email)
	if err != nil {
		return store.Subscriber{}, bad("email: %v", err)
	}
	name, err := address.CheckName(in.Name)
	if err != nil {
		return store.Subscriber{}, bad("name: %v", err)
	}
	tz, err := checkTimezone(in.Timezone)
	if err != nil {
		return store.Subscriber{}, err
	}
	chosen := s.topics().Defaults()
	if in.Topics != nil {
		if chosen, err = s.topics().Check(*in.Topics); err != nil {
			return store.Subscriber{}, bad("topics: %v", err)
		}
	}
	if len(chosen) == 0 {
		return store.Subscriber{}, bad("topics: choose at least one")
	}
	tags, fields, err := s.checkExtras(ctx, &in.Tags, in.Fields)
	if err != nil {
		return store.Subscriber{}, err
	}
	reason, err := checkReason(in.Reason)
	if err != nil {
		return store.Subscriber{}, err
	}
	if !in.DoubleOptIn && reason == "" {
		return store.Subscriber{}, bad("reason: required without double opt-in (why this person may be mailed without confirming)")
	}
	req := store.SubscribeRequest{Email: email, Name: name, Timezone: tz, Topics: chosen, OnlyNew: true,
		Source: store.SourceAdmin, Activate: !in.DoubleOptIn, Tags: tags, Fields: fields}
	return s.add(ctx, req, in.DoubleOptIn, reason)
}

// add stores the checked req and sends its first mail: the confirmation
// with double opt-in, else the sequence's first step, the person's
// consent kept with the reason and the actor.
func (s *Service) add(ctx context.Context, req store.SubscribeRequest, doubleOptIn bool, reason string) (store.Subscriber, error) {
	email, now := req.Email, s.now()
	job := tasks.NewConfirm(email, now)
	if !doubleOptIn {
		who, _ := actor(ctx)
		req.Reason, req.Actor = reason, who
		job = s.FirstStep(email, now)
	}
	req.Outbox = job.Outbox()
	sub, err := s.Store.Subscribe(ctx, req)
	switch {
	case errors.Is(err, store.ErrExists) && sub.Status.Suppressed():
		return sub, &ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("%s is suppressed (%s): only their own confirmation or lifting the suppression brings them back", email, sub.Status)}
	case errors.Is(err, store.ErrExists):
		return sub, &ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("%s is already on the list (%s)", email, sub.Status)}
	case errors.Is(err, store.ErrErased):
		return sub, &ListError{Code: http.StatusConflict, Msg: email + " was erased at their own request: only their own signup brings them back"}
	case err != nil:
		return sub, err
	}
	s.DispatchSignup(ctx, job)
	detail := "double opt-in: confirmation sent"
	if !doubleOptIn {
		detail = "without double opt-in: " + reason
		s.Notify.NotifyLogged(ctx, webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, sub, ""))
	}
	if s.Audit != nil {
		_ = s.Audit.Note(ctx, audit.Entry{Action: AuditSubscriberAdded, Target: s.Audit.Subscriber(email), Detail: detail}) // logged and counted by the Trail
	}
	return sub, nil
}

// checkExtras checks tags (nil: none given) and custom field values
// against the declarations, before anything is written.
func (s *Service) checkExtras(ctx context.Context, tags *[]string, fields map[string]string) ([]string, map[string]string, error) {
	var out []string
	if tags != nil {
		for _, t := range *tags {
			t = strings.TrimSpace(t)
			if err := store.CheckTag(t); err != nil {
				return nil, nil, bad("tags: %v", err)
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		if len(out) > store.MaxTagsPerPerson {
			return nil, nil, bad("tags: at most %d", store.MaxTagsPerPerson)
		}
	}
	if len(fields) == 0 {
		return out, nil, nil
	}
	defs, err := s.Store.FieldDefs(ctx)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]store.FieldDef, len(defs))
	for _, d := range defs {
		byName[d.Name] = d
	}
	checked, err := store.CheckFieldValues(byName, fields)
	if err != nil {
		return nil, nil, bad("fields: %v", err)
	}
	return out, checked, nil
}
