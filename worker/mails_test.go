package worker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// recorder is a Mailer that keeps what it was asked to send and can fail.
type recorder struct {
	mu   sync.Mutex
	sent []*mailer.Message
	fail error
}

func (r *recorder) Send(_ context.Context, m *mailer.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.sent = append(r.sent, m)
	return nil
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.sent) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newHandlers(t *testing.T) (Handlers, *store.Redis, *recorder) {
	t.Helper()
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	st, rec := newStore(t), &recorder{}
	return NewHandlers(Deps{
		Store: st, Mailer: rec, Render: render, Log: discard, Metrics: NewMetrics(nil), Links: newHandlersLinks(),
	}), st, rec
}

// newStore is the store on an empty database of the worker's Redis (or a
// miniredis of its own). Tests that call it again start over.
func newStore(t *testing.T) *store.Redis {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBWorker)
	return store.NewRedis(rdb)
}

// newAwayStore is newStore behind a fault that takes its Redis away on
// demand, on a client that holds the commands of a context that waits
// out Redis, as the service's do (redisconn.Hold, outside the fault).
func newAwayStore(t *testing.T) (*store.Redis, *redisfault.Fault) {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBWorker)
	redisconn.Hold(rdb)
	return store.NewRedis(rdb), redisfault.Add(rdb)
}

func newHandlersLinks() Links {
	return Links{BaseURL: "https://news.example.com", Signer: token.NewSigner([]byte("0123456789abcdef"), 0), ListID: "News <newsletter.example.com>"}
}

func activate(t *testing.T, st store.Store, email string) store.Subscriber {
	t.Helper()
	sub, err := st.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Activate: true, Outbox: tasks.NewWelcome(email, time.Now(), 0).Outbox()})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestWelcomeToActiveSubscriber(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "ann@example.com")
	if err := runTask(context.Background(), tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("ann@example.com", time.Now(), 0).Task); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatalf("%d mails, want 1", rec.count())
	}
	m := rec.sent[0]
	if m.To != "ann@example.com" || m.Kind != mailer.KindWelcome || m.UnsubscribeURL == "" {
		t.Fatalf("unexpected mail %+v", m)
	}
	sub, err := h.Mails.Links.Signer.Verify(token.Unsubscribe, m.UnsubscribeURL[len("https://news.example.com/unsubscribe?token="):])
	if want, _ := st.Get(context.Background(), "ann@example.com"); err != nil || sub.ID != want.ID {
		t.Fatalf("unsubscribe link does not verify: %+v %v", sub, err)
	}
}

// tokenLinks are the token links in a mail: the List-Unsubscribe target
// and every link in its text part.
var tokenLinks = regexp.MustCompile(`https://news\.example\.com/[a-z]+\?token=[^\s"<>]+`)

// TestLinksNameNoAddress: no link in any mail shows whose it is. Each
// token's parts are decoded (as anyone who sees the URL can) and must not
// hold the address or any part of it; the links still verify.
func TestLinksNameNoAddress(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	const email = "zoe.quinn@example.org"
	pending, err := st.Subscribe(ctx, store.SubscribeRequest{Email: email, Outbox: tasks.NewConfirm(email, time.Now()).Outbox()})
	if err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, tasks.NewConfirm(email, time.Now()).Task); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Confirm(ctx, email, tasks.NewWelcome(email, time.Now(), 0).Outbox()); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome(email, time.Now(), 0).Task); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.UnsubscribeEmail, h.Mails.HandleUnsubscribeLink, tasks.NewUnsubscribeLink(email)); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 3 {
		t.Fatalf("%d mails, want the confirmation, the welcome and the unsubscribe link", rec.count())
	}
	purposes := map[string]token.Purpose{"confirm": token.Confirm, "unsubscribe": token.Unsubscribe, "preferences": token.Preferences}
	seen := map[string]bool{}
	for _, m := range rec.sent {
		links := append(tokenLinks.FindAllString(m.Text, -1), m.UnsubscribeURL)
		for _, link := range links {
			if link == "" {
				continue
			}
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			page, tok := strings.TrimPrefix(u.Path, "/"), u.Query().Get("token")
			// The payload is the part before the dot; the MAC after it is
			// random bytes that may spell anything.
			payload, _, _ := strings.Cut(tok, ".")
			b, err := base64.RawURLEncoding.DecodeString(payload)
			if err != nil {
				t.Fatalf("the %s mail's token %q: %v", m.Kind, tok, err)
			}
			decoded := string(b)
			for _, leak := range []string{"@", "zoe", "quinn", "example.org"} {
				if strings.Contains(link, leak) || strings.Contains(decoded, leak) {
					t.Fatalf("the %s mail's link %s shows %q: %q", m.Kind, link, leak, decoded)
				}
			}
			got, err := h.Mails.Links.Signer.Verify(purposes[page], tok)
			if err != nil || got.ID != pending.ID {
				t.Fatalf("the %s mail's %s link: %+v %v, want subscriber %d", m.Kind, page, got, err, pending.ID)
			}
			seen[page] = true
		}
	}
	if len(seen) != 3 {
		t.Fatalf("links seen for %v, want confirm, unsubscribe and preferences", seen)
	}
}

func TestWelcomeTwiceSendsOnce(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "ann@example.com")
	task := tasks.NewWelcome("ann@example.com", time.Now(), 0).Task
	for i := 0; i < 3; i++ {
		if err := runTask(context.Background(), tasks.WelcomeEmail, h.Sequence.HandleWelcome, task); err != nil {
			t.Fatal(err)
		}
	}
	if rec.count() != 1 {
		t.Fatalf("the same welcome task ran 3 times and sent %d mails", rec.count())
	}
}

func TestSkipWhenNotActive(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	activate(t, st, "gone@example.com")
	st.Unsubscribe(ctx, "gone@example.com")
	for _, email := range []string{"gone@example.com", "never@example.com"} {
		if err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome(email, time.Now(), 0).Task); err != nil {
			t.Fatalf("%s: %v, want nil (skip)", email, err)
		}
	}
	if rec.count() != 0 {
		t.Fatalf("sent %d mails to people who are not subscribed", rec.count())
	}
}

func TestConfirmOnlyWhilePending(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	job := tasks.NewConfirm("p@example.com", time.Now())
	st.Subscribe(ctx, store.SubscribeRequest{Email: "p@example.com", Outbox: job.Outbox()})
	if err := runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task); err != nil || rec.count() != 1 {
		t.Fatalf("pending: %v, %d mails", err, rec.count())
	}
	if rec.sent[0].UnsubscribeURL != "" {
		t.Fatal("a confirmation is transactional: no unsubscribe header")
	}
	// Re-running the same task (a retry after a lost ack) sends nothing.
	runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, job.Task)
	// A new request (the first mail was lost) sends again.
	runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, tasks.NewConfirm("p@example.com", time.Now()).Task)
	if rec.count() != 2 {
		t.Fatalf("%d confirmations, want 2 (one per request)", rec.count())
	}
	st.Confirm(ctx, "p@example.com", tasks.NewWelcome("p@example.com", time.Now(), 0).Outbox())
	runTask(ctx, tasks.ConfirmEmail, h.Mails.HandleConfirm, tasks.NewConfirm("p@example.com", time.Now()).Task)
	if rec.count() != 2 {
		t.Fatal("confirmation sent to an active subscriber")
	}
}

func TestBadPayloadSkipsRetry(t *testing.T) {
	h, _, _ := newHandlers(t)
	for _, p := range []string{"{", `{"email":""}`, `[]`} {
		for name, r := range map[string]route{"welcome": on(tasks.WelcomeEmail, h.Sequence.HandleWelcome), "confirm": on(tasks.ConfirmEmail, h.Mails.HandleConfirm)} {
			err := r.handler.ProcessTask(context.Background(), asynq.NewTask("x", []byte(p)))
			if !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("%s %q: %v, want SkipRetry", name, p, err)
			}
		}
	}
}

func TestSendFailureClasses(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		class      email.Class
		skipRetry  bool
		wantStatus store.Status
	}{
		{email.Temporary, false, store.Active},
		{email.Throttled, false, store.Active},
		{email.Bounced, true, store.Bounced},
		{email.Rejected, true, store.Active},
	}
	for _, c := range cases {
		h, st, rec := newHandlers(t)
		activate(t, st, "a@x.org")
		rec.fail = &email.SendError{Class: c.class, Code: 500, Domain: "x.org", Err: errors.New("scripted")}
		err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task)
		if err == nil || errors.Is(err, asynq.SkipRetry) != c.skipRetry {
			t.Errorf("%s: err %v, want SkipRetry=%v", c.class, err, c.skipRetry)
		}
		sub, _ := st.Get(ctx, "a@x.org")
		if sub.Status != c.wantStatus {
			t.Errorf("%s: status %s, want %s", c.class, sub.Status, c.wantStatus)
		}
		// The claim was released: a retry that succeeds sends the mail.
		rec.fail = nil
		if c.class == email.Temporary {
			if err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task); err != nil || rec.count() != 1 {
				t.Errorf("retry after temporary failure: %v, %d mails", err, rec.count())
			}
		}
	}
}

func TestBusyClaimIsNotAFailure(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	sub := activate(t, st, "a@x.org")
	if _, err := st.ClaimMarks(ctx, "", []store.Mark{{Kind: mailer.KindWelcome, SubscriberID: sub.ID, Shared: true}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task)
	if !errors.Is(err, ErrDeliveryBusy) || IsFailure(err) || rec.count() != 0 {
		t.Fatalf("held claim: %v (failure=%v), %d mails", err, IsFailure(err), rec.count())
	}
	if d := (RetryPolicy{Busy: time.Minute}).Delay(0, err, nil); d != time.Minute {
		t.Fatalf("busy retry in %s", d)
	}
}

func TestRetryDelayGrows(t *testing.T) {
	p := RetryPolicy{Base: time.Second, Max: time.Hour, Throttled: time.Minute}
	temp := &email.SendError{Class: email.Temporary}
	prevMax := time.Duration(0)
	for n := 0; n < 6; n++ {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for i := 0; i < 50; i++ {
			d := p.Delay(n, temp, nil)
			lo, hi = min(lo, d), max(hi, d)
		}
		window := time.Second << n
		if lo < window/2 || hi > window || lo < prevMax/2 {
			t.Fatalf("retry %d: delays in [%s, %s], want within [%s, %s]", n, lo, hi, window/2, window)
		}
		prevMax = hi
	}
	if d := p.Delay(0, &email.SendError{Class: email.Throttled}, nil); d < 30*time.Second {
		t.Fatalf("throttled retry after %s: must wait longer than a temporary one", d)
	}
	if d := p.Delay(40, temp, nil); d > time.Hour {
		t.Fatalf("cap exceeded: %s", d)
	}
	if d := p.Delay(0, &email.SendError{Class: email.Temporary, RetryAfter: 7 * time.Second}, nil); d != 7*time.Second {
		t.Fatalf("a provider's Retry-After of 7s gave %s", d)
	}
}

// TestRedisAwayRetriesSoonWithoutFailure: a task that failed because Redis
// could not be reached comes back in seconds and keeps its retries; a send
// that failed on a network error is the mail's, with the usual backoff.
func TestRedisAwayRetriesSoonWithoutFailure(t *testing.T) {
	away := fmt.Errorf("claim delivery: claim 1 marks: %w", syscall.ECONNREFUSED)
	p := RetryPolicy{Base: time.Minute}
	if d := p.Delay(3, away, nil); d != DefaultRedisAwayRetry || IsFailure(away) {
		t.Fatalf("Redis away: retry in %s, failure=%v", d, IsFailure(away))
	}
	smtpDown := &email.SendError{Class: email.Temporary, Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	if d := p.Delay(0, smtpDown, nil); d < 30*time.Second || !IsFailure(smtpDown) {
		t.Fatalf("SMTP server down: retry in %s, failure=%v; want the backoff", d, IsFailure(smtpDown))
	}
}

// TestUnsubscribeLinkGoesOnlyToSubscribers: the link goes to an active or
// pending subscriber, nowhere else.
func TestUnsubscribeLinkGoesOnlyToSubscribers(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "on@example.com")
	activate(t, st, "gone@example.com")
	if _, err := st.Unsubscribe(context.Background(), "gone@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"on@example.com", "gone@example.com", "never@example.com"} {
		if err := runTask(context.Background(), tasks.UnsubscribeEmail, h.Mails.HandleUnsubscribeLink, tasks.NewUnsubscribeLink(email)); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
	}
	if rec.count() != 1 || rec.sent[0].To != "on@example.com" || rec.sent[0].Kind != mailer.KindUnsubscribe ||
		!strings.Contains(rec.sent[0].Text, "/unsubscribe?token=") {
		t.Fatalf("links sent: %d %+v", rec.count(), rec.sent)
	}
}

// TestPreferencesLinkGoesOnlyToActiveSubscribers: the fresh preferences
// link goes to an active subscriber, with a link that opens their
// preferences; nowhere else.
func TestPreferencesLinkGoesOnlyToActiveSubscribers(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "on@example.com")
	activate(t, st, "gone@example.com")
	if _, err := st.Unsubscribe(context.Background(), "gone@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"on@example.com", "gone@example.com", "never@example.com"} {
		if err := runTask(context.Background(), tasks.PreferencesEmail, h.Mails.HandlePreferencesLink, tasks.NewPreferencesLink(email)); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
	}
	if rec.count() != 1 || rec.sent[0].To != "on@example.com" || rec.sent[0].Kind != mailer.KindPreferences ||
		!strings.Contains(rec.sent[0].Text, "Your preferences: https://news.example.com/preferences?token=") {
		t.Fatalf("links sent: %d %+v", rec.count(), rec.sent)
	}
}
