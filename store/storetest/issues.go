package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// testIssues: a draft keeps its versions, slugs are unique, a sending
// issue is frozen, transitions are atomic (one of two sends wins) and
// progress counts marks and outcomes.
func testIssues(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	c := store.IssueContent{Subject: "Hello, World!", Body: "one", Topics: []string{"digest"}}
	a, err := s.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Slug != "hello-world" || b.Slug != "hello-world-2" || a.Status != store.IssueDraft {
		t.Fatalf("slugs %q %q status %q", a.Slug, b.Slug, a.Status)
	}
	c2 := c
	c2.Body = "two"
	if _, err := s.UpdateIssue(ctx, a.ID, 1, c2); err != nil {
		t.Fatal(err)
	}
	vers, err := s.IssueVersions(ctx, a.ID)
	if err != nil || len(vers) != 1 || vers[0].Body != "one" {
		t.Fatalf("versions %+v %v", vers, err)
	}
	got, err := s.IssueBySlug(ctx, "hello-world")
	if err != nil || got.Body != "two" || got.Version != 2 {
		t.Fatalf("by slug %+v %v", got, err)
	}
	// Two sends at once: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.TransitionIssue(ctx, a.ID, []string{store.IssueDraft, store.IssueScheduled}, store.IssueSending, store.IssueChange{})
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !(errors.Is(errs[0], store.ErrIssueState) || errors.Is(errs[1], store.ErrIssueState)) {
		t.Fatalf("two sends: %v, %v", errs[0], errs[1])
	}
	if _, err := s.UpdateIssue(ctx, a.ID, 2, c); !errors.Is(err, store.ErrIssueState) {
		t.Fatalf("edit while sending: %v", err)
	}
	if _, err := s.Issue(ctx, 999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("missing issue: %v", err)
	}
	list, err := s.ListIssues(ctx, "", 0, 10)
	if err != nil || len(list) != 2 || list[0].ID != b.ID {
		t.Fatalf("list %+v %v", list, err)
	}
	if list, _ = s.ListIssues(ctx, store.IssueSending, 0, 10); len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("list sending %+v", list)
	}
	// Progress: three planned, one sent, one skipped, one failed.
	if err := s.AdvanceIssuePlan(ctx, a.ID, 1, store.WalkByID, 30, 3, true); err != nil {
		t.Fatal(err)
	}
	if done, err := s.FinishIssue(ctx, a.ID); err != nil || done {
		t.Fatalf("finished early: %v %v", done, err)
	}
	key := store.IssueOutcomeKey(a.ID)
	if err := s.MarkSent(ctx, store.Mark{Kind: store.IssueMarkKind, Key: itoa(a.ID), SubscriberID: 10, Shared: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOutcome(ctx, key, store.OutcomeSkipped, 20); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOutcome(ctx, key, store.OutcomeFailed, 30); err != nil {
		t.Fatal(err)
	}
	p, err := s.IssueProgress(ctx, a.ID)
	if err != nil || p.Planned != 3 || p.Sent != 1 || p.Skipped != 1 || p.Failed != 1 || !p.PlanDone {
		t.Fatalf("progress %+v %v", p, err)
	}
	gen, err := s.ArchiveGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := s.FinishIssue(ctx, a.ID); err != nil || !done {
		t.Fatalf("not finished: %v %v", done, err)
	}
	// The archive's caches learn of the new issue by the generation.
	if g, err := s.ArchiveGeneration(ctx); err != nil || g != gen+1 {
		t.Fatalf("archive generation %d after finishing, was %d: %v", g, gen, err)
	}
	if done, _ := s.FinishIssue(ctx, a.ID); done {
		t.Fatal("finished twice")
	}
	if _, err := s.FinishIssue(ctx, 999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("finish issue 999: %v", err)
	}
	if g, _ := s.ArchiveGeneration(ctx); g != gen+1 {
		t.Fatalf("archive generation moved without a newly sent issue: %d", g)
	}
	if list, _ = s.SentIssues(ctx, "digest", 0, 10); len(list) != 1 || list[0].ID != a.ID || list[0].SentAt.IsZero() {
		t.Fatalf("sent issues %+v", list)
	}
	// A new round resets the walk; a stale round's advance is ignored.
	if _, err := s.TransitionIssue(ctx, b.ID, []string{store.IssueDraft}, store.IssuePaused, store.IssueChange{NewRound: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceIssuePlan(ctx, b.ID, 1, store.WalkByID, 50, 5, false); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.IssueProgress(ctx, b.ID); p.Round != 2 || p.Planned != 0 {
		t.Fatalf("stale round counted: %+v", p)
	}
	// The status alone, as a sender reads it between mails.
	if st, err := s.IssueStatus(ctx, b.ID); err != nil || st != (store.IssueStatus{Status: store.IssuePaused, Round: 2, Version: 1}) {
		t.Fatalf("status of b %+v %v", st, err)
	}
	if st, err := s.IssueStatus(ctx, a.ID); err != nil || st != (store.IssueStatus{Status: store.IssueSent, Round: 1, Version: 2}) {
		t.Fatalf("status of a %+v %v", st, err)
	}
	if _, err := s.IssueStatus(ctx, 999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("status of issue 999: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// testIssueTransitionWritesOutbox: the plan's outbox entry is written in
// the same step as the status, and not at all when the change is refused
// (wrong status, or the issue has moved on to another round).
func testIssueTransitionWritesOutbox(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	is, err := s.CreateIssue(ctx, store.IssueContent{Subject: "S", Body: "b", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	entry := func(id string) outbox.Entry { return outbox.Entry{ID: id, Due: due, Body: []byte(`{"x":1}`)} }
	outbox := func() []string {
		t.Helper()
		es, err := s.OutboxDue(ctx, due.Add(time.Second), 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if _, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueSending,
		store.IssueChange{Outbox: entry("refused-state")}); !errors.Is(err, store.ErrIssueState) {
		t.Fatalf("from a status it is not in: %v", err)
	}
	if _, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending,
		store.IssueChange{Round: is.Round + 1, Outbox: entry("refused-round")}); !errors.Is(err, store.ErrIssueStale) {
		t.Fatalf("in another round: %v", err)
	}
	if got := outbox(); len(got) != 0 {
		t.Fatalf("a refused change wrote outbox entries %v", got)
	}
	got, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending,
		store.IssueChange{Round: is.Round, Outbox: entry("plan")})
	if err != nil || got.Status != store.IssueSending {
		t.Fatalf("send: %+v %v", got, err)
	}
	if ids := outbox(); len(ids) != 1 || ids[0] != "plan" {
		t.Fatalf("outbox after the send: %v, want [plan]", ids)
	}
}

// testDigestIssue: a digest run is sent as one issue, made once per run
// whatever the content of a second call; the run counts by it, and a
// report traced to the issue counts against it (and so the run).
func testDigestIssue(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	c := store.IssueContent{Subject: "What is new (2031-W02)", Body: "- [A](https://example.com/a)", Topics: []string{"digest"}}
	if _, err := s.DigestIssue(ctx, "2031-W02", c); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("issue of a run that does not exist: %v", err)
	}
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "reader@x.io", Activate: true})
	must(t, err)
	must2(t)(s.AddItem(ctx, store.Item{Title: "A", URL: "https://example.com/a"}))
	run, _, err := s.StartDigestRun(ctx, "2031-W02")
	if err != nil || !run.AsIssue || run.Issue != 0 || run.State != store.RunPlanning {
		t.Fatalf("new run %+v %v", run, err)
	}
	is, err := s.DigestIssue(ctx, "2031-W02", c)
	if err != nil || is.Slug != "digest-2031-w02" || is.Period != "2031-W02" || is.Status != store.IssueDraft || is.Subject != c.Subject {
		t.Fatalf("digest issue %+v %v", is, err)
	}
	other := c
	other.Subject = "something else"
	again, err := s.DigestIssue(ctx, "2031-W02", other)
	if err != nil || again.ID != is.ID || again.Subject != c.Subject {
		t.Fatalf("second call made or changed an issue: %+v %v", again, err)
	}
	if list, _ := s.ListIssues(ctx, "", 0, 10); len(list) != 1 {
		t.Fatalf("%d issues after two calls", len(list))
	}
	// The run counts by its issue.
	must2(t)(s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}))
	must(t, s.AdvanceIssuePlan(ctx, is.ID, 1, store.WalkByID, sub.ID, 1, true))
	must(t, s.MarkSent(ctx, store.Mark{Kind: store.IssueMarkKind, Key: itoa(is.ID), SubscriberID: sub.ID, Shared: true}))
	if run, err = s.DigestRun(ctx, "2031-W02"); err != nil || run.Issue != is.ID || run.State != store.RunPlanned || run.Planned != 1 || run.Sent != 1 {
		t.Fatalf("run by its issue %+v %v", run, err)
	}
	// A complaint traced to the issue: the issue's progress and the run.
	must2(t)(s.RecordFeedback(ctx, store.Feedback{ID: "c1", SubscriberID: sub.ID, Type: store.Complaint, Issue: is.ID}, store.FeedbackPolicy{}))
	must2(t)(s.RecordFeedback(ctx, store.Feedback{ID: "c1", SubscriberID: sub.ID, Type: store.Complaint, Issue: is.ID}, store.FeedbackPolicy{}))
	p, err := s.IssueProgress(ctx, is.ID)
	if err != nil || p.Complaints != 1 || p.Bounces != 0 {
		t.Fatalf("issue progress after a complaint (sent twice) %+v %v", p, err)
	}
	if run, _ = s.DigestRun(ctx, "2031-W02"); run.Complaints != 1 || run.ComplaintRate != 1 {
		t.Fatalf("run after a complaint %+v", run)
	}
	// A report naming an issue that does not exist changes no issue.
	must2(t)(s.RecordFeedback(ctx, store.Feedback{ID: "b1", SubscriberID: sub.ID, Type: store.HardBounce, Issue: 999}, store.FeedbackPolicy{}))
	if _, err := s.IssueProgress(ctx, 999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("a report made issue 999: %v", err)
	}
}

// testIssueAdvanceOnce: a page saved again (a lost answer) counts once.
func testIssueAdvanceOnce(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	is, err := s.CreateIssue(ctx, store.IssueContent{Subject: "S", Body: "b", Topics: []string{"digest"}}, "")
	must(t, err)
	for range 2 {
		must(t, s.AdvanceIssuePlan(ctx, is.ID, 1, store.WalkByID, 50, 5, false))
	}
	must(t, s.AdvanceIssuePlan(ctx, is.ID, 1, store.WalkByID, 50, 0, true))
	if p, err := s.IssueProgress(ctx, is.ID); err != nil || p.Planned != 5 || p.Cursor != 50 || !p.PlanDone {
		t.Fatalf("a page saved twice: %+v %v", p, err)
	}
}

// testIssueWritesCompareAndSet: every write of an issue is made against
// the version it read. A stale edit is refused and changes nothing; a
// move of the status never writes the content, so an edit saved while
// someone schedules the send is what goes out; a pause remembers where
// the issue was; refusals name the status.
func testIssueWritesCompareAndSet(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	is, err := s.CreateIssue(ctx, store.IssueContent{Subject: "S", Body: "one", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Two people opened version 1; the first saves, the second is stale.
	if _, err := s.UpdateIssue(ctx, is.ID, 1, store.IssueContent{Subject: "S", Body: "two", Topics: []string{"digest"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateIssue(ctx, is.ID, 1, store.IssueContent{Subject: "S", Body: "late", Topics: []string{"digest"}}); !errors.Is(err, store.ErrIssueStale) {
		t.Fatalf("a stale edit: %v, want ErrIssueStale", err)
	}
	if got, _ := s.Issue(ctx, is.ID); got.Body != "two" || got.Version != 2 {
		t.Fatalf("after a stale edit: body %q version %d, want two 2", got.Body, got.Version)
	}
	// Scheduling after the edit keeps it; the schedule is its own field.
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	got, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueScheduled,
		store.IssueChange{Round: 1, SetSchedule: true, SendAt: at})
	if err != nil || got.Body != "two" || !got.SendAt.Equal(at) {
		t.Fatalf("schedule: %+v %v", got, err)
	}
	if _, err := s.UpdateIssue(ctx, is.ID, 2, store.IssueContent{Subject: "S", Body: "three", Topics: []string{"digest"}}); err != nil {
		t.Fatal(err)
	}
	// A send confirmed on version 2 is refused now that it is 3.
	if _, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueSending,
		store.IssueChange{Round: 1, Version: 2}); !errors.Is(err, store.ErrIssueStale) {
		t.Fatalf("a send on a stale version: %v, want ErrIssueStale", err)
	}
	got, err = s.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssuePaused, store.IssueChange{Round: 1})
	if err != nil || got.PausedFrom != store.IssueScheduled || !got.SendAt.Equal(at) || got.Body != "three" {
		t.Fatalf("pause: %+v %v", got, err)
	}
	_, err = s.UpdateIssue(ctx, is.ID, 3, store.IssueContent{Subject: "S", Body: "x", Topics: []string{"digest"}})
	var se *store.StateError
	if !errors.As(err, &se) || se.Status != store.IssuePaused || !errors.Is(err, store.ErrIssueState) {
		t.Fatalf("edit of a paused issue: %v, want a StateError naming paused", err)
	}
	got, err = s.TransitionIssue(ctx, is.ID, []string{store.IssuePaused}, store.IssueScheduled, store.IssueChange{Round: 1, NewRound: true})
	if err != nil || got.PausedFrom != "" || got.Round != 2 || !got.SendAt.Equal(at) {
		t.Fatalf("resume: %+v %v", got, err)
	}
	// Back to a draft: the schedule is cleared.
	got, err = s.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueDraft,
		store.IssueChange{Round: 2, NewRound: true, SetSchedule: true})
	if err != nil || !got.SendAt.IsZero() || got.LocalTime != "" || got.Status != store.IssueDraft {
		t.Fatalf("unschedule: %+v %v", got, err)
	}
}

// testIssueAudience: whom a send reaches, counted as the planner walks
// it: active readers of any of the topics, each once.
func testIssueAudience(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	add := func(email string, topics []string, active bool) {
		t.Helper()
		if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: email, Topics: topics, Activate: active}); err != nil {
			t.Fatal(err)
		}
	}
	add("a@example.com", []string{"digest"}, true)
	add("b@example.com", []string{"digest", "updates"}, true)
	add("c@example.com", []string{"updates"}, true)
	add("d@example.com", []string{"digest"}, false) // pending
	for _, tc := range []struct {
		topics []string
		want   int64
	}{{[]string{"digest"}, 2}, {[]string{"updates"}, 2}, {[]string{"digest", "updates"}, 3}, {nil, 0}} {
		if n, err := s.IssueAudience(ctx, tc.topics); err != nil || n != tc.want {
			t.Errorf("audience of %v: %d %v, want %d", tc.topics, n, err, tc.want)
		}
	}
}

// testEndSaysWhetherItEnded: an unsubscribe or a bounce says whether
// this call ended the subscription; the same again says it did not.
func testEndSaysWhetherItEnded(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "ann@example.com", Activate: true}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Unsubscribe(ctx, "ann@example.com")
	if err != nil || !first.Ended || first.Status != store.Unsubscribed {
		t.Fatalf("first unsubscribe: %+v %v, want ended", first, err)
	}
	again, err := s.Unsubscribe(ctx, "ann@example.com")
	if err != nil || again.Ended {
		t.Fatalf("the same unsubscribe again: %+v %v, want not ended by this call", again, err)
	}
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "bob@example.com", Activate: true, Topics: []string{"digest"}}); err != nil {
		t.Fatal(err)
	}
	left, err := s.LeaveTopic(ctx, "bob@example.com", "digest", outbox.Cancel{})
	if err != nil || !left.Ended || left.Status != store.Unsubscribed {
		t.Fatalf("leaving the last topic: %+v %v, want ended", left, err)
	}
}
