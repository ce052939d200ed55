package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// signup subscribes email as the API does, with the confirmation's hold,
// and returns its confirmation task.
func signup(t *testing.T, st store.Store, email, name string, hold store.ConfirmHold) (*asynq.Task, error) {
	t.Helper()
	job := tasks.NewConfirm(email, time.Now())
	_, err := st.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Name: name, Outbox: job.Outbox(), Hold: hold})
	return job.Task, err
}

// TestConfirmationIsAddressedToTheBareAddress: whatever name the
// requester typed, the confirmation's To: is the address alone; the
// welcome, which the person confirmed, greets them by name.
func TestConfirmationIsAddressedToTheBareAddress(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	spam := "FREE iPhone! Claim at https://evil.example.com/win"
	task, err := signup(t, st, "victim@example.com", spam, store.ConfirmHold{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, task); err != nil || rec.count() != 1 {
		t.Fatalf("confirm: %v, %d mails", err, rec.count())
	}
	if m := rec.sent[0]; m.To != "victim@example.com" || m.ToName != "" {
		t.Fatalf("the confirmation is addressed to %q <%s>: the requester's text reached the victim", m.ToName, m.To)
	}
	if err := runTask(ctx, tasks.UnsubscribeEmail, h.Mails.HandleUnsubscribeLink, tasks.NewUnsubscribeLink("victim@example.com")); err != nil || rec.count() != 2 {
		t.Fatalf("unsubscribe link: %v, %d mails", err, rec.count())
	}
	if m := rec.sent[1]; m.ToName != "" {
		t.Fatalf("the unsubscribe link is addressed to %q", m.ToName)
	}
}

// TestConfirmationToASuppressedAddressOnlyWhenAsked: a complained address
// gets no confirmation from a task queued before its complaint; it gets
// the one a signup asked for since.
func TestConfirmationToASuppressedAddressOnlyWhenAsked(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	old, err := signup(t, st, "c@example.com", "", store.ConfirmHold{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordFeedback(ctx, store.Feedback{Email: "c@example.com", Type: store.Complaint}, store.FeedbackPolicy{}); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, old); err != nil || rec.count() != 0 {
		t.Fatalf("a confirmation queued before the complaint: %v, %d mails", err, rec.count())
	}
	asked, err := signup(t, st, "c@example.com", "", store.ConfirmHold{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, asked); err != nil || rec.count() != 1 {
		t.Fatalf("the confirmation a signup asked for: %v, %d mails", err, rec.count())
	}
}

// TestUnrenderableMailGivesTheAllowanceBack: a confirmation whose template
// fails, or whose message cannot be built, fails for good and does not
// use up the mailbox's cooldown and daily cap: the next signup mails.
// Likewise the unsubscribe link.
func TestUnrenderableMailGivesTheAllowanceBack(t *testing.T) {
	ctx := context.Background()
	hold := store.ConfirmHold{Every: time.Hour, PerDay: 1}
	broken := t.TempDir()
	for _, f := range []string{"confirm.txt", "unsubscribe.txt"} {
		// index past the end fails when the template runs, not when it
		// is parsed: a start-up check cannot catch it.
		if err := os.WriteFile(filepath.Join(broken, f), []byte(`{{define "subject"}}x{{end}}{{index .Email 999}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		fail error  // what the mailer answers
		dir  string // the templates
	}{
		{"template fails", nil, broken},
		{"message cannot be built", &email.SendError{Class: email.Invalid, Err: errors.New("go-mail: bad To")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			render, err := mailer.NewRenderer(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			st, rec := newStore(t), &recorder{fail: c.fail}
			h := NewHandlers(Deps{Store: st, Mailer: rec, Render: render, Log: discard, Metrics: NewMetrics(nil), Links: newHandlersLinks()})
			task, err := signup(t, st, "v+1@example.com", "", hold)
			if err != nil {
				t.Fatal(err)
			}
			if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, task); !errors.Is(err, asynq.SkipRetry) || !Unrenderable(err) {
				t.Fatalf("an unrenderable confirmation: %v, want a final failure", err)
			}
			if _, err := signup(t, st, "v+2@example.com", "", hold); err != nil {
				t.Fatalf("the next signup of the mailbox after a mail that never went out: %v", err)
			}
			if ok, err := st.TakeHold(ctx, store.HoldUnsubscribe, "v@example.com", hold); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if err := runTask(ctx, tasks.UnsubscribeEmail, h.Mails.HandleUnsubscribeLink, tasks.NewUnsubscribeLink("v+1@example.com")); !Unrenderable(err) {
				t.Fatalf("an unrenderable unsubscribe link: %v", err)
			}
			if ok, err := st.TakeHold(ctx, store.HoldUnsubscribe, "v@example.com", hold); err != nil || !ok {
				t.Fatalf("the unsubscribe allowance after a link that never went out: %v %v", ok, err)
			}
		})
	}
	// A mail that went out keeps its count.
	h, st, _ := newHandlers(t)
	task, err := signup(t, st, "w@example.com", "", hold)
	if err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, task); err != nil {
		t.Fatal(err)
	}
	if _, err := signup(t, st, "w+2@example.com", "", hold); !errors.Is(err, store.ErrConfirmHeld) {
		t.Fatalf("after a confirmation went out: %v, want held", err)
	}
}
