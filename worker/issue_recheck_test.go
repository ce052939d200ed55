package worker

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/tasks"
)

// A batch reads its readers at its start, then sends for a while: a
// reader who unsubscribes after that read, while the batch is still
// sending, gets no mail (issue #45's soak saw three land after their
// readers' acknowledged unsubscribes). Their mail is skipped, not
// failed, and the issue still finishes.
func TestIssueBatchSkipsReaderWhoLeftMidBatch(t *testing.T) {
	h, st, _ := newHandlers(t)
	ctx := context.Background()
	is, ids := sendingIssue(t, st, "u", 4)
	clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	h.Issues.Now = clk.now
	mail := &onSend{hook: func(n int) {
		if n == 1 {
			// The batch has read every reader and sent to the first.
			if _, err := st.Unsubscribe(ctx, "u2@example.org"); err != nil {
				t.Error(err)
			}
		}
	}}
	h.Issues.Deliver.Mailer = mail
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, tasks.NewIssueBatch(is.ID, is.Round, ids, clk.now(), false)); err != nil {
		t.Fatal(err)
	}
	for _, m := range mail.sent {
		if m.To == "u2@example.org" {
			t.Fatalf("an issue mail went to %s, who had unsubscribed before it went", m.To)
		}
	}
	if mail.count() != 3 {
		t.Fatalf("%d mails, want 3 (the readers still subscribed)", mail.count())
	}
	p, err := st.IssueProgress(ctx, is.ID)
	if err != nil || p.Sent != 3 || p.Skipped != 1 || p.Failed != 0 {
		t.Fatalf("progress %+v %v: want 3 sent, 1 skipped, none failed", p, err)
	}
}
