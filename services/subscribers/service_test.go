package subscribers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/subscribers"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// fakeStore is the store as far as these tests reach it: the methods they
// call are below; any other panics (the embedded nil interface), which
// tells a test that it reached further than it meant to.
type fakeStore struct {
	subscribers.Store
	people     map[string]store.Subscriber
	subscribed []store.SubscribeRequest
	// unsubscribed are the outbox ids each UnsubscribeFrom was given.
	unsubscribed [][]string
}

func (f *fakeStore) Get(_ context.Context, email string) (store.Subscriber, error) {
	sub, ok := f.people[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	return sub, nil
}

func (f *fakeStore) Subscribe(_ context.Context, req store.SubscribeRequest) (store.Subscriber, error) {
	if sub, ok := f.people[req.Email]; ok {
		return sub, store.ErrExists
	}
	f.subscribed = append(f.subscribed, req)
	return store.Subscriber{ID: 7, Email: req.Email, Status: store.Pending, Topics: req.Topics}, nil
}

func (f *fakeStore) UnsubscribeFrom(_ context.Context, email string, _ int64, cancel ...string) (store.Subscriber, error) {
	f.unsubscribed = append(f.unsubscribed, cancel)
	sub, ok := f.people[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	sub.Status = store.Unsubscribed
	return sub, nil
}

// deleted records the tasks a Service asked to delete.
type deleted struct{ ids []string }

func (d *deleted) DeleteTask(_, id string) error { d.ids = append(d.ids, id); return nil }

// dispatched records the jobs a Service dispatched.
type dispatched struct{ jobs []tasks.Job }

func (d *dispatched) Dispatch(_ context.Context, j tasks.Job) (bool, error) {
	d.jobs = append(d.jobs, j)
	return false, nil
}

func newService(st *fakeStore) (*subscribers.Service, *deleted, *dispatched) {
	del, jobs := &deleted{}, &dispatched{}
	return &subscribers.Service{Store: st, Topics: topics.Default(time.Hour), Jobs: jobs, Tasks: del,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}, del, jobs
}

// listError is err as a *ListError, failing t when it is not one.
func listError(t *testing.T, err error) *subscribers.ListError {
	t.Helper()
	var le *subscribers.ListError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want a *ListError", err, err)
	}
	return le
}

// TestAddSubscriberRefuses: what an addition by hand refuses, with the
// status and message the API and the console answer, nothing stored.
func TestAddSubscriberRefuses(t *testing.T) {
	st := &fakeStore{people: map[string]store.Subscriber{"on@example.com": {Email: "on@example.com", Status: store.Active}}}
	svc, _, _ := newService(st)
	ctx := context.Background()
	for _, c := range []struct {
		in   subscribers.AddInput
		code int
		msg  string
	}{
		{subscribers.AddInput{Email: "not an address", DoubleOptIn: true}, http.StatusBadRequest, "email: "},
		{subscribers.AddInput{Email: "new@example.com"}, http.StatusBadRequest, "reason: required without double opt-in"},
		{subscribers.AddInput{Email: "new@example.com", DoubleOptIn: true, Timezone: "Mars/Olympus"}, http.StatusBadRequest, `unknown time zone "Mars/Olympus"`},
		{subscribers.AddInput{Email: "new@example.com", DoubleOptIn: true, Topics: &[]string{}}, http.StatusBadRequest, "topics: choose at least one"},
		{subscribers.AddInput{Email: "on@example.com", DoubleOptIn: true}, http.StatusConflict, "on@example.com is already on the list (active)"},
	} {
		_, err := svc.AddSubscriber(ctx, c.in)
		le := listError(t, err)
		if le.Code != c.code || !strings.HasPrefix(le.Msg, c.msg) {
			t.Errorf("%+v: %d %q, want %d %q…", c.in, le.Code, le.Msg, c.code, c.msg)
		}
	}
	if len(st.subscribed) != 0 {
		t.Errorf("stored %d people, want none", len(st.subscribed))
	}
}

// TestAddSubscriberWithoutOptIn: a person added without double opt-in is
// active at once, their consent names the reason and the admin, and
// their first mail is the sequence's first step, not a confirmation.
func TestAddSubscriberWithoutOptIn(t *testing.T) {
	st := &fakeStore{people: map[string]store.Subscriber{}}
	svc, _, jobs := newService(st)
	ctx := adminauth.NewContext(context.Background(), adminauth.Principal{Name: "alice", Role: adminauth.Admin})
	if _, err := svc.AddSubscriber(ctx, subscribers.AddInput{Email: "New@Example.com", Reason: " met at the fair "}); err != nil {
		t.Fatal(err)
	}
	if len(st.subscribed) != 1 {
		t.Fatalf("stored %d, want 1", len(st.subscribed))
	}
	req := st.subscribed[0]
	if req.Email != "new@example.com" || !req.Activate || req.Reason != "met at the fair" || req.Actor != "alice" || req.Source != store.SourceAdmin {
		t.Errorf("request = %+v", req)
	}
	want := svc.FirstStep("new@example.com", time.Unix(1_700_000_000, 0))
	if len(jobs.jobs) != 1 || jobs.jobs[0].ID != want.ID {
		t.Errorf("dispatched %+v, want the first step %s", jobs.jobs, want.ID)
	}
}

// TestStartBulkErasureAsksTwice: an erasure of a list of addresses
// without the confirmed count answers the count and touches nobody (the
// store has no person, so reading one would fail the test).
func TestStartBulkErasureAsksTwice(t *testing.T) {
	svc, del, _ := newService(&fakeStore{})
	_, err := svc.StartBulk(context.Background(), subscribers.BulkInput{Action: "erase", Emails: []string{"a@example.com", "B@example.com", "a@example.com"}})
	var ce *subscribers.ConfirmError
	if !errors.As(err, &ce) || ce.Count != 2 {
		t.Fatalf("err = %v, want a ConfirmError of 2 (the addresses once each)", err)
	}
	if len(del.ids) != 0 {
		t.Errorf("deleted tasks %v before the confirmation", del.ids)
	}
	_, err = svc.StartBulk(context.Background(), subscribers.BulkInput{Action: "erase"})
	if le := listError(t, err); le.Code != http.StatusBadRequest || le.Msg != "give a filter or a list of emails (one of them)" {
		t.Errorf("neither filter nor emails: %d %q", le.Code, le.Msg)
	}
}

// TestChangeSubscriberRefuses: a change that names nothing, or leaves no
// topic, is refused before the store is read.
func TestChangeSubscriberRefuses(t *testing.T) {
	svc, _, _ := newService(&fakeStore{})
	_, err := svc.ChangeSubscriber(context.Background(), "a@example.com", subscribers.ChangeInput{})
	if le := listError(t, err); !strings.HasPrefix(le.Msg, "nothing to change") {
		t.Errorf("empty change: %q", le.Msg)
	}
	_, err = svc.ChangeSubscriber(context.Background(), "a@example.com", subscribers.ChangeInput{Topics: &[]string{}})
	if le := listError(t, err); le.Msg != "topics: at least one (unsubscribe ends a subscription)" {
		t.Errorf("no topic: %q", le.Msg)
	}
}

// TestSetTopicsRefuses: an unknown topic is the caller's mistake (a
// TopicsError), a person not active is store.ErrNotActive.
func TestSetTopicsRefuses(t *testing.T) {
	st := &fakeStore{people: map[string]store.Subscriber{"p@example.com": {Email: "p@example.com", Status: store.Pending}}}
	svc, _, _ := newService(st)
	var te *subscribers.TopicsError
	if _, err := svc.SetTopics(context.Background(), "p@example.com", []string{"no-such-topic"}); !errors.As(err, &te) {
		t.Errorf("unknown topic: err = %v, want a TopicsError", err)
	}
	ids := topics.Default(0).Defaults()
	if _, err := svc.SetTopics(context.Background(), "p@example.com", ids); !errors.Is(err, store.ErrNotActive) {
		t.Errorf("pending person: err = %v, want ErrNotActive", err)
	}
}

// TestEndSubscriptionOfStranger: ending an address not on the list is no
// error and does the same work as for a subscriber (its waiting mails
// cancelled in the store and deleted from the queue), so the answer
// tells nobody who is on the list.
func TestEndSubscriptionOfStranger(t *testing.T) {
	st := &fakeStore{people: map[string]store.Subscriber{}}
	svc, del, _ := newService(st)
	if err := svc.EndSubscription(context.Background(), "who@example.com"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range tasks.PendingMails("who@example.com", topics.Default(time.Hour).Sequence) {
		want = append(want, p.ID)
	}
	if len(st.unsubscribed) != 1 || !slices.Equal(st.unsubscribed[0], want) {
		t.Errorf("store cancelled %v, want %v", st.unsubscribed, want)
	}
	if !slices.Equal(del.ids, want) {
		t.Errorf("deleted %v, want %v", del.ids, want)
	}
}

// TestWriteExportCSVWithoutJobs: without the worker's jobs an export id
// is unknown: 404 with the message the API answers.
func TestWriteExportCSVWithoutJobs(t *testing.T) {
	svc, _, _ := newService(&fakeStore{})
	w := httptest.NewRecorder()
	svc.WriteExportCSV(w, httptest.NewRequest(http.MethodGet, "/api/exports/x", nil), "x")
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusNotFound || body["error"] != "no such export (exports are kept 24 hours)" {
		t.Errorf("%d %v", w.Code, body)
	}
}
