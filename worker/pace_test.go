package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// fakePacer answers Take with a scripted wait and records throttles.
type fakePacer struct {
	mu        sync.Mutex
	take      []time.Duration // successive answers; the last repeats
	domain    time.Duration
	throttled map[string]time.Duration
}

// next is the scripted wait of the next TakeN.
func (f *fakePacer) next() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.take[0]
	if len(f.take) > 1 {
		f.take = f.take[1:]
	}
	return d
}

func (f *fakePacer) TakeN(_ context.Context, n int) (int, time.Duration, error) {
	if d := f.next(); d > 0 {
		return 0, d, nil
	}
	return n, 0, nil
}

func (f *fakePacer) DomainWait(context.Context, string) (time.Duration, error) { return f.domain, nil }

func (f *fakePacer) Throttle(_ context.Context, domain string, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.throttled == nil {
		f.throttled = map[string]time.Duration{}
	}
	f.throttled[domain] = d
	return nil
}

func TestRateLimitDefersWithoutFailure(t *testing.T) {
	h, st, rec := newHandlers(t)
	h.Mails.Deliver.Pace = &fakePacer{take: []time.Duration{5 * time.Second}}
	sub := activate(t, st, "a@x.org")
	err := runTask(context.Background(), tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task)
	var d *Deferred
	if !errors.As(err, &d) || IsFailure(err) || rec.count() != 0 {
		t.Fatalf("%v (failure=%v), %d mails", err, IsFailure(err), rec.count())
	}
	if got := (RetryPolicy{}).Delay(3, err, nil); got != 5*time.Second {
		t.Fatalf("deferred task retried after %s, want the limiter's 5s", got)
	}
	// The claim was released, so the retry can send.
	if c, _ := st.ClaimMarks(context.Background(), "", []store.Mark{{Kind: mailer.KindWelcome, SubscriberID: sub.ID, Shared: true}}, time.Minute); len(c) != 1 || c[0] != store.Claimed {
		t.Fatalf("claim left behind: %v", c)
	}
}

func TestShortRateWaitIsInline(t *testing.T) {
	h, st, rec := newHandlers(t)
	h.Mails.Deliver.Pace = &fakePacer{take: []time.Duration{20 * time.Millisecond, 0}}
	activate(t, st, "a@x.org")
	if err := runTask(context.Background(), tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task); err != nil || rec.count() != 1 {
		t.Fatalf("%v, %d mails", err, rec.count())
	}
}

func TestConfirmationNotHeldByBulkRate(t *testing.T) {
	h, st, rec := newHandlers(t)
	h.Mails.Deliver.Pace = &fakePacer{take: []time.Duration{time.Hour}}
	job := tasks.NewConfirm("p@x.org", time.Now())
	st.Subscribe(context.Background(), store.SubscribeRequest{Email: "p@x.org", Outbox: job.Outbox()})
	if err := runTask(context.Background(), tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task); err != nil || rec.count() != 1 {
		t.Fatalf("confirmation held by the bulk rate: %v, %d mails", err, rec.count())
	}
}

func TestThrottledReplyPausesTheDomain(t *testing.T) {
	h, st, rec := newHandlers(t)
	p := &fakePacer{take: []time.Duration{0}}
	h.Mails.Deliver.Pace, h.Mails.Deliver.Throttle = p, 3*time.Minute
	activate(t, st, "a@x.org")
	rec.fail = &email.SendError{Class: email.Throttled, Code: 421, Domain: "x.org", Err: errors.New("slow down")}
	if err := runTask(context.Background(), tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task); err == nil {
		t.Fatal("throttled send reported success")
	}
	if p.throttled["x.org"] != 3*time.Minute {
		t.Fatalf("domain not paused: %v", p.throttled)
	}
	// While paused, even a confirmation to that domain waits.
	p.domain = 2 * time.Minute
	job := tasks.NewConfirm("q@x.org", time.Now())
	st.Subscribe(context.Background(), store.SubscribeRequest{Email: "q@x.org", Outbox: job.Outbox()})
	var d *Deferred
	if err := runTask(context.Background(), tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task); !errors.As(err, &d) || d.In != 2*time.Minute {
		t.Fatalf("send to a paused domain: %v", err)
	}
}

// TestConfirmationRateHoldsAnAttack: past the service-wide confirmation
// rate a confirmation waits (deferred, not failed); the bulk rate never
// holds it.
func TestConfirmationRateHoldsAnAttack(t *testing.T) {
	h, st, rec := newHandlers(t)
	h.Mails.Deliver.Pace = &fakePacer{take: []time.Duration{time.Hour}} // bulk: full, but not for confirmations
	h.Mails.Deliver.ConfirmPace = &fakePacer{take: []time.Duration{30 * time.Second}}
	job := tasks.NewConfirm("c@x.org", time.Now())
	if _, err := st.Subscribe(context.Background(), store.SubscribeRequest{Email: "c@x.org", Outbox: job.Outbox()}); err != nil {
		t.Fatal(err)
	}
	err := runTask(context.Background(), tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task)
	var d *Deferred
	if !errors.As(err, &d) || IsFailure(err) || rec.count() != 0 {
		t.Fatalf("over the confirmation rate: %v (failure %v), %d mails", err, IsFailure(err), rec.count())
	}
	h.Mails.Deliver.ConfirmPace = &fakePacer{take: []time.Duration{0}}
	if err := runTask(context.Background(), tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task); err != nil || rec.count() != 1 {
		t.Fatalf("under the rate: %v, %d mails", err, rec.count())
	}
}

// TestConfirmationCarriesNoTextOfTheRequester: the name typed into the
// public form is not in the confirmation mail.
func TestConfirmationCarriesNoTextOfTheRequester(t *testing.T) {
	h, st, rec := newHandlers(t)
	job := tasks.NewConfirm("v@x.org", time.Now())
	if _, err := st.Subscribe(context.Background(), store.SubscribeRequest{Email: "v@x.org", Name: "WIN a prize at https://evil.example/", Outbox: job.Outbox()}); err != nil {
		t.Fatal(err)
	}
	if err := runTask(context.Background(), tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task); err != nil || rec.count() != 1 {
		t.Fatalf("%v, %d mails", err, rec.count())
	}
	m := rec.sent[0]
	for _, part := range []string{m.Subject, m.Text, m.HTML} {
		if strings.Contains(part, "evil.example") || strings.Contains(part, "WIN a prize") {
			t.Fatalf("the requester's text is in the confirmation:\n%s", part)
		}
	}
}
