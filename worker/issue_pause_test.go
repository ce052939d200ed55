package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// clock is a time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// onSend records mails and calls hook after the n-th one (from 1).
type onSend struct {
	recorder
	hook func(n int)
}

func (o *onSend) Send(ctx context.Context, m *mailer.Message) error {
	if err := o.recorder.Send(ctx, m); err != nil {
		return err
	}
	o.hook(o.count())
	return nil
}

// sendingIssue subscribes n readers of the digest topic (addresses
// prefix0@example.org…) and makes an issue to them that is sending: the
// start of a batch test. It returns the issue and the readers' ids.
func sendingIssue(t *testing.T, st store.Store, prefix string, n int) (store.Issue, []int64) {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	for i := range n {
		sub, err := st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("%s%d@example.org", prefix, i), Activate: true, Topics: []string{topics.Digest}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	is, err := st.CreateIssue(ctx, store.IssueContent{Subject: "Letter", Body: "Text", Topics: []string{topics.Digest}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, err = st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	return is, ids
}

// A running batch reads its issue's status once per CheckInterval, not
// per mail: a pause is seen by the first mail due after the interval has
// passed since the last read, and the batch hands the rest back unsent.
// The resume's batch sends exactly those; nobody gets it twice. The time
// is the sender's clock, moved by the test: no assertion waits on the
// wall clock.
func TestIssueBatchSeesPauseWithinCheckInterval(t *testing.T) {
	h, st, _ := newHandlers(t)
	ctx := context.Background()
	is, ids := sendingIssue(t, st, "r", 10)
	clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	h.Issues.Now, h.Issues.CheckInterval = clk.now, time.Second
	mail := &onSend{hook: func(n int) {
		switch n {
		case 3:
			// Paused now; within the interval the batch goes on.
			if _, err := st.TransitionIssue(ctx, is.ID, []string{store.IssueSending}, store.IssuePaused, store.IssueChange{}); err != nil {
				t.Error(err)
			}
		case 5:
			clk.add(time.Second)
		}
	}}
	h.Issues.Deliver.Mailer = mail
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, tasks.NewIssueBatch(is.ID, is.Round, ids, clk.now(), false)); err != nil {
		t.Fatal(err)
	}
	if mail.count() != 5 {
		t.Fatalf("%d mails before the batch saw the pause, want 5 (3 before it, 2 within the interval)", mail.count())
	}
	p, err := st.IssueProgress(ctx, is.ID)
	if err != nil || p.Sent != 5 || p.Status != store.IssuePaused {
		t.Fatalf("progress %+v %v", p, err)
	}

	// Resumed: the new round's batch finds the unsent readers' claims
	// released and sends to them alone.
	if is, err = st.TransitionIssue(ctx, is.ID, []string{store.IssuePaused}, store.IssueSending, store.IssueChange{NewRound: true}); err != nil {
		t.Fatal(err)
	}
	mail.hook = func(int) {}
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, tasks.NewIssueBatch(is.ID, is.Round, ids, clk.now(), false)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range mail.sent {
		got[m.To]++
	}
	if len(mail.sent) != 10 || len(got) != 10 {
		t.Fatalf("%d mails to %d readers after the resume, want each of 10 once: %v", len(mail.sent), len(got), got)
	}
}

// A batch of a round that a pause and resume ended stops too, even
// though the issue is sending again: the new round plans its readers.
func TestIssueBatchOfAnEarlierRoundStops(t *testing.T) {
	h, st, _ := newHandlers(t)
	ctx := context.Background()
	is, ids := sendingIssue(t, st, "e", 4)
	clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	h.Issues.Now, h.Issues.CheckInterval = clk.now, time.Second
	mail := &onSend{hook: func(n int) {
		if n == 1 {
			for _, to := range []string{store.IssuePaused, store.IssueSending} {
				ch := store.IssueChange{NewRound: to == store.IssueSending}
				if _, err := st.TransitionIssue(ctx, is.ID, []string{store.IssueSending, store.IssuePaused}, to, ch); err != nil {
					t.Error(err)
				}
			}
			clk.add(time.Second)
		}
	}}
	h.Issues.Deliver.Mailer = mail
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, tasks.NewIssueBatch(is.ID, is.Round, ids, clk.now(), false)); err != nil {
		t.Fatal(err)
	}
	if mail.count() != 1 {
		t.Fatalf("%d mails, want 1: the round ended after the first", mail.count())
	}
}
