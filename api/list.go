package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Owning the list: adding a person by hand, changing one, bulk actions on
// a selection and the CSV export (docs/publishing.md). The console calls
// the same methods (AddSubscriber, ChangeSubscriber, StartBulk,
// StartExport, WriteExportCSV), so a change is the same from both.

// The audit actions of the list.
const (
	AuditSubscriberAdded = "subscriber.added"
)

// MaxReason is the longest reason an addition without double opt-in
// takes; MaxBulkEmails the most addresses a bulk action names.
const (
	maxListBody = 256 << 10
)

func bad(format string, a ...any) error {
	return &subscribers.ListError{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, a...)}
}

func (s *Server) listRoutes() {
	m := s.mux
	m.Handle("POST /api/subscribers", s.Admin(http.HandlerFunc(s.addSubscriber)))
	m.Handle("PATCH /api/subscribers/{email}", s.Admin(http.HandlerFunc(s.patchSubscriber)))
	m.Handle("POST /api/subscribers/bulk", s.Admin(http.HandlerFunc(s.bulkSubscribers)))
	m.Handle("GET /api/bulk/{id}", s.Admin(http.HandlerFunc(s.bulkStatus)))
	m.Handle("POST /api/exports", s.Admin(http.HandlerFunc(s.createExport)))
	m.Handle("GET /api/exports/{id}", s.Admin(http.HandlerFunc(s.getExport)))
}

// readListBody decodes a JSON body into v: unknown fields refused, so a
// misspelt field is an error, not a silent no-op.
func readListBody(w http.ResponseWriter, r *http.Request, v any) error {
	return readJSONBody(w, r, maxListBody, v)
}

// readJSONBody decodes a JSON body of at most max bytes into v: unknown
// fields refused. The error is a *ListError (answerListError).
func readJSONBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	err := httpbody.Limit(w, r, max)
	if err == nil {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil && dec.More() {
			err = errors.New("one JSON object expected")
		}
	}
	switch {
	case httpbody.IsTooLarge(err):
		return &subscribers.ListError{Code: http.StatusRequestEntityTooLarge, Msg: "request body too large"}
	case errors.Is(err, io.EOF):
		return bad("a JSON body is required")
	case err != nil:
		return bad("unreadable body: %v", err)
	}
	return nil
}

// answerListError answers err: a ListError as it says, a store failure
// as 503.
func (s *Server) answerListError(w http.ResponseWriter, what string, err error) {
	var le *subscribers.ListError
	switch {
	case errors.As(err, &le):
		webjson.Write(w, le.Code, errorBody(le.Msg))
	case errors.Is(err, store.ErrBadQuery):
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
	case errors.Is(err, store.ErrNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no such subscriber"))
	default:
		s.deps.Log.Error(what+": store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(what+": the store cannot be reached just now; trying again is safe"))
	}
}

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
	if len(reason) > subscribers.MaxReason || strings.ContainsFunc(reason, unicode.IsControl) {
		return "", bad("reason: at most %d characters on one line", subscribers.MaxReason)
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
func (s *Server) AddSubscriber(ctx context.Context, in subscribers.AddInput) (store.Subscriber, error) {
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
	chosen := s.cfg.Topics.Current().Defaults()
	if in.Topics != nil {
		if chosen, err = s.cfg.Topics.Current().Check(*in.Topics); err != nil {
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
	who, _ := actor(ctx)
	now := s.deps.Now()
	req := store.SubscribeRequest{Email: email, Name: name, Timezone: tz, Topics: chosen, OnlyNew: true,
		Source: store.SourceAdmin, Activate: !in.DoubleOptIn, Tags: tags, Fields: fields}
	job := tasks.NewConfirm(email, now)
	if !in.DoubleOptIn {
		req.Reason, req.Actor = reason, who
		job = s.firstStep(email, now)
	}
	req.Outbox = job.Outbox()
	sub, err := s.deps.Store.Subscribe(ctx, req)
	switch {
	case errors.Is(err, store.ErrExists) && sub.Status.Suppressed():
		return sub, &subscribers.ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("%s is suppressed (%s): only their own confirmation or lifting the suppression brings them back", email, sub.Status)}
	case errors.Is(err, store.ErrExists):
		return sub, &subscribers.ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("%s is already on the list (%s)", email, sub.Status)}
	case errors.Is(err, store.ErrErased):
		return sub, &subscribers.ListError{Code: http.StatusConflict, Msg: email + " was erased at their own request: only their own signup brings them back"}
	case err != nil:
		return sub, err
	}
	s.dispatchSignup(ctx, job)
	detail := "double opt-in: confirmation sent"
	if !in.DoubleOptIn {
		detail = "without double opt-in: " + reason
		s.deps.Notify.NotifyLogged(ctx, tasks.SubscriberWebhookEvent(tasks.WebhookSubscriberConfirmed, sub, ""))
	}
	if s.deps.Audit != nil {
		_ = s.deps.Audit.Note(ctx, audit.Entry{Action: AuditSubscriberAdded, Target: s.deps.Audit.Subscriber(email), Detail: detail}) // logged and counted by the Trail
	}
	return sub, nil
}

// addSubscriber handles POST /api/subscribers.
func (s *Server) addSubscriber(w http.ResponseWriter, r *http.Request) {
	var in subscribers.AddInput
	if err := readListBody(w, r, &in); err != nil {
		s.answerListError(w, "add a subscriber", err)
		return
	}
	sub, err := s.AddSubscriber(r.Context(), in)
	if err != nil {
		s.answerListError(w, "add a subscriber", err)
		return
	}
	webjson.Write(w, http.StatusCreated, listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)})
}

// checkExtras checks tags (nil: none given) and custom field values
// against the declarations, before anything is written.
func (s *Server) checkExtras(ctx context.Context, tags *[]string, fields map[string]string) ([]string, map[string]string, error) {
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
	defs, err := s.deps.Store.FieldDefs(ctx)
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

// ChangeSubscriber sets what in gives of the person with address email,
// everything checked first; the name, time zone and topics change in one
// step of the store, then the tags and the fields, each in a step of its
// own. It is audited.
func (s *Server) ChangeSubscriber(ctx context.Context, email string, in subscribers.ChangeInput) (store.Subscriber, error) {
	var c store.Change
	var what []string
	tags, fields, err := s.checkExtras(ctx, in.Tags, in.Fields)
	if err != nil {
		return store.Subscriber{}, err
	}
	if in.Tags != nil {
		what = append(what, "tags")
	}
	if in.Fields != nil {
		what = append(what, "fields")
	}
	core := len(what)
	if in.Name != nil {
		name, err := address.CheckName(*in.Name)
		if err != nil {
			return store.Subscriber{}, bad("name: %v", err)
		}
		c.Name, what = &name, append(what, "name")
	}
	if in.Timezone != nil {
		tz, err := checkTimezone(*in.Timezone)
		if err != nil {
			return store.Subscriber{}, err
		}
		c.Timezone, what = &tz, append(what, "time zone")
	}
	if in.Topics != nil {
		chosen, err := s.cfg.Topics.Current().Check(*in.Topics)
		if err != nil {
			return store.Subscriber{}, bad("topics: %v", err)
		}
		if len(chosen) == 0 {
			return store.Subscriber{}, bad("topics: at least one (unsubscribe ends a subscription)")
		}
		c.Topics, what = chosen, append(what, "topics")
		c.Cancel = tasks.SequenceCancel(email, s.cfg.Topics.Current().Sequence)
	}
	if len(what) == 0 {
		return store.Subscriber{}, bad("nothing to change: give name, timezone, topics, tags or fields")
	}
	before, err := s.deps.Store.Get(ctx, email)
	if err != nil {
		return before, err
	}
	sub := before
	if len(what) > core {
		sub, err = s.deps.Store.ChangeSubscriber(ctx, email, c)
		if errors.Is(err, store.ErrNotActive) {
			return sub, &subscribers.ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("the subscription is %s: topics change only while it runs", sub.Status)}
		}
		if err != nil {
			return sub, err
		}
	}
	if in.Tags != nil {
		if err := s.replaceTags(ctx, before, tags); err != nil {
			return sub, err
		}
		sub.Tags = slices.Sorted(slices.Values(tags)) // as the store keeps them
	}
	if in.Fields != nil {
		if sub.Fields, err = s.deps.Store.SetFields(ctx, before.ID, fields); err != nil {
			return sub, err
		}
	}
	seq := s.cfg.Topics.Current().Sequence
	if c.Topics != nil && strings.Contains(","+strings.Join(before.Topics, ",")+",", ","+seq.Topic+",") && !strings.Contains(","+strings.Join(sub.Topics, ",")+",", ","+seq.Topic+",") {
		s.deleteTasks(tasks.SequenceTasks(email, seq))
	}
	s.noteSubscriber(ctxRequest(ctx), audit.SubscriberChanged, email, "by hand: "+strings.Join(what, ", "))
	return sub, nil
}

// replaceTags makes before's tags be tags: those missing are added, the
// others removed, each in a step of the store.
func (s *Server) replaceTags(ctx context.Context, before store.Subscriber, tags []string) error {
	add := slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return slices.Contains(before.Tags, t) })
	remove := slices.DeleteFunc(slices.Clone(before.Tags), func(t string) bool { return slices.Contains(tags, t) })
	if len(add) > 0 {
		if _, err := s.deps.Store.AddTags(ctx, before.ID, add); err != nil {
			return err
		}
	}
	if len(remove) > 0 {
		if _, err := s.deps.Store.RemoveTags(ctx, before.ID, remove); err != nil {
			return err
		}
	}
	return nil
}

// ctxRequest carries ctx to noteSubscriber, which takes a request.
func ctxRequest(ctx context.Context) *http.Request {
	return (&http.Request{}).WithContext(ctx)
}

// patchSubscriber handles PATCH /api/subscribers/{email}.
func (s *Server) patchSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	var in subscribers.ChangeInput
	if err := readListBody(w, r, &in); err != nil {
		s.answerListError(w, "change a subscriber", err)
		return
	}
	sub, err := s.ChangeSubscriber(r.Context(), email, in)
	if err != nil {
		s.answerListError(w, "change a subscriber", err)
		return
	}
	webjson.Write(w, http.StatusOK, listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)})
}
