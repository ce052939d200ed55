package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func (d *delivery) sendIssue(t *testing.T, c store.IssueContent) store.Issue {
	t.Helper()
	ctx := context.Background()
	is, err := d.store.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, err = d.store.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Enqueue(tasks.NewIssuePlan(is.ID, is.Round, time.Now()).Task); err != nil {
		t.Fatal(err)
	}
	return is
}

func (d *delivery) waitIssueSent(t *testing.T, id int64) store.IssueProgress {
	t.Helper()
	var p store.IssueProgress
	poll.Until(t, 90*time.Second, func() error {
		p, _ = d.store.IssueProgress(context.Background(), id)
		if p.Status == store.IssueSent {
			return nil
		}
		return fmt.Errorf("issue %d: %+v; smtp got %d", id, p, len(d.smtp.Messages()))
	})
	return p
}

// An issue to one topic goes to that topic's readers only, each once,
// whichever other topics they have.
func TestIssueToOneTopicEachOnce(t *testing.T) {
	d := newDelivery(t)
	only := func(ts ...string) func(*store.SubscribeRequest) {
		return func(r *store.SubscribeRequest) { r.Topics = ts }
	}
	digestOnly := seed(t, d.store, "d", 150, only(topics.Digest))
	updatesOnly := seed(t, d.store, "u", 100, only(topics.Updates))
	both := seed(t, d.store, "b", 50, only(topics.Digest, topics.Updates))
	d.startWorker(t, 100000, 8)

	is := d.sendIssue(t, store.IssueContent{Subject: "Our March letter", Preheader: "Spring is here",
		Body: "Hello **readers**, see [the notes](https://example.com/notes).", Topics: []string{topics.Updates}})
	p := d.waitIssueSent(t, is.ID)
	d.exactlyOnce(t, append(updatesOnly, both...))
	for _, e := range digestOnly {
		if n := len(d.smtp.To(e)); n != 0 {
			t.Fatalf("%s (digest only) got %d mails of an updates issue", e, n)
		}
	}
	if p.Planned != 150 || p.Sent != 150 || p.Skipped != 0 || p.Failed != 0 {
		t.Fatalf("progress %+v", p)
	}
	m := d.smtp.To(updatesOnly[0])[0]
	if m.Header.Get("Subject") != "Our March letter" || !strings.Contains(m.Text(), "Hello readers, see the notes [1]") ||
		!strings.Contains(m.Text(), "[1] https://example.com/notes") || !strings.Contains(m.HTML(), "<strong>readers</strong>") ||
		!strings.Contains(m.HTML(), "Spring is here</div>") || m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("issue mail:\n%s", m.Data)
	}
	// A second round (as a resume plans) sends nobody anything more.
	if _, err := d.store.TransitionIssue(context.Background(), is.ID, []string{store.IssueSent}, store.IssueSending, store.IssueChange{NewRound: true}); err != nil {
		t.Fatal(err)
	}
	d.client.Enqueue(tasks.NewIssuePlan(is.ID, is.Round+1, time.Now()).Task)
	d.waitIssueSent(t, is.ID)
	d.exactlyOnce(t, append(updatesOnly, both...))
}

// Paused at about half of 2,000 readers and resumed: each gets it once,
// nobody is skipped.
func TestIssuePauseResumeEachOnce(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	readers := seed(t, d.store, "r", 2000)
	d.startWorker(t, 400, 8) // slow enough to pause midway

	is := d.sendIssue(t, store.IssueContent{Subject: "Long letter", Body: "Text", Topics: []string{topics.Digest}})
	poll.True(t, 60*time.Second, "half sent", func() bool {
		p, _ := d.store.IssueProgress(ctx, is.ID)
		return p.Sent >= 1000
	})
	if _, err := d.store.TransitionIssue(ctx, is.ID, []string{store.IssueSending}, store.IssuePaused, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	// Paused: the queue drains without sending everyone.
	poll.True(t, 60*time.Second, "queue drained while paused", func() bool {
		info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		return err == nil && info.Size == 0
	})
	paused, _ := d.store.IssueProgress(ctx, is.ID)
	if paused.Status != store.IssuePaused || paused.Sent >= 2000 {
		t.Fatalf("pause did not hold: %+v", paused)
	}
	is, err := d.store.TransitionIssue(ctx, is.ID, []string{store.IssuePaused}, store.IssueSending, store.IssueChange{NewRound: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Enqueue(tasks.NewIssuePlan(is.ID, is.Round, time.Now()).Task); err != nil {
		t.Fatal(err)
	}
	p := d.waitIssueSent(t, is.ID)
	d.exactlyOnce(t, readers)
	if p.Sent != 2000 || p.Planned != 2000 || p.Skipped != 0 {
		t.Fatalf("progress %+v", p)
	}
}
