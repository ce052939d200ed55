package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const feedbackAdmin = "feedback-admin-token-0123"

func (e *env) adminRaw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+feedbackAdmin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// queuedFeedback lists the feedback tasks waiting in the queue.
func (e *env) queuedFeedback(t *testing.T) []tasks.FeedbackPayload {
	t.Helper()
	infos, err := e.insp.ListPendingTasks(tasks.QueueOf(tasks.TypeFeedback))
	if err != nil && !strings.Contains(err.Error(), "NOT_FOUND") && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	var out []tasks.FeedbackPayload
	for _, ti := range infos {
		if ti.Type != tasks.TypeFeedback {
			continue
		}
		var p tasks.FeedbackPayload
		if err := json.Unmarshal(ti.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestWebhooksQueueVerifiedEventsOnly: a signed Mailgun event is queued
// (the worker applies it); a forged one is 401 and queues nothing; a
// provider that is not configured has no route; the generic endpoint
// needs the admin token and a valid type.
func TestWebhooksQueueVerifiedEventsOnly(t *testing.T) {
	key := []byte("mailgun-signing-key")
	e := newEnvWithProviders(t, Config{AdminToken: feedbackAdmin}, map[string]feedback.ProviderWebhook{"mailgun": &feedback.Mailgun{SigningKey: key}}, func(d *Deps) {
	})
	mailgun := func(key []byte) string {
		ts := fmt.Sprint(time.Now().Unix())
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ts + "tok"))
		return fmt.Sprintf(`{"signature":{"timestamp":%q,"token":"tok","signature":%q},
			"event-data":{"event":"failed","severity":"permanent","recipient":"gone@example.org","id":"mg-1"}}`, ts, hex.EncodeToString(mac.Sum(nil)))
	}
	if resp, body := e.post(t, "/webhooks/mailgun", "application/json", mailgun([]byte("guessed key"))); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged: %d %s", resp.StatusCode, body)
	}
	if q := e.queuedFeedback(t); len(q) != 0 {
		t.Fatalf("a forged event was queued: %+v", q)
	}
	if resp, body := e.post(t, "/webhooks/mailgun", "application/json", mailgun(key)); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed: %d %s", resp.StatusCode, body)
	}
	q := e.queuedFeedback(t)
	if len(q) != 1 || q[0].Email != "gone@example.org" || q[0].Type != "hard" || q[0].Source != "mailgun" {
		t.Fatalf("queued %+v", q)
	}
	if resp, _ := e.post(t, "/webhooks/sendgrid", "application/json", `[]`); resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("an unconfigured provider answered %d", resp.StatusCode)
	}

	generic := `{"email":"Soft@Example.org","type":"soft","reason":"mailbox full","id":"x1"}`
	if resp, _ := e.post(t, "/webhooks/bounce", "application/json", generic); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("generic without the token: %d", resp.StatusCode)
	}
	if code, body := e.adminRaw(t, "POST", "/webhooks/bounce", `{"email":"a@example.org","type":"maybe"}`); code != http.StatusBadRequest {
		t.Fatalf("generic with a bad type: %d %s", code, body)
	}
	if code, body := e.adminRaw(t, "POST", "/webhooks/bounce", generic); code != http.StatusOK {
		t.Fatalf("generic: %d %s", code, body)
	}
	if q := e.queuedFeedback(t); len(q) != 2 {
		t.Fatalf("queued after the generic report: %+v", q)
	}
}

// nonces is feedback.Nonces in memory, or away like a Redis that is down.
type nonces struct {
	mu   sync.Mutex
	used map[string]string
	away bool
}

func (n *nonces) Use(_ context.Context, nonce, digest string, _ time.Duration) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.away {
		return false, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	if d, ok := n.used[nonce]; ok {
		return d == digest, nil
	}
	n.used[nonce] = digest
	return true, nil
}

// TestMailgunReplayRefused: a captured Mailgun signature with another body
// is 401 and queues nothing; when the tokens cannot be checked (Redis
// away) the answer is 503, so Mailgun delivers the event again later.
func TestMailgunReplayRefused(t *testing.T) {
	key := []byte("mailgun-signing-key")
	seen := &nonces{used: map[string]string{}}
	e := newEnvWithProviders(t, Config{AdminToken: feedbackAdmin}, map[string]feedback.ProviderWebhook{"mailgun": &feedback.Mailgun{SigningKey: key, Nonces: seen}}, func(d *Deps) {
	})
	ts := fmt.Sprint(time.Now().Unix())
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(ts + "tok"))
	signature := fmt.Sprintf(`{"timestamp":%q,"token":"tok","signature":%q}`, ts, hex.EncodeToString(mac.Sum(nil)))
	event := func(recipient string) string {
		return fmt.Sprintf(`{"signature":%s,"event-data":{"event":"failed","severity":"permanent","recipient":%q,"id":"mg-%s"}}`, signature, recipient, recipient)
	}
	if resp, body := e.post(t, "/webhooks/mailgun", "application/json", event("gone@example.org")); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.post(t, "/webhooks/mailgun", "application/json", event("victim@example.org")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed signature, another body: %d %s", resp.StatusCode, body)
	}
	if q := e.queuedFeedback(t); len(q) != 1 || q[0].Email != "gone@example.org" {
		t.Fatalf("queued %+v", q)
	}
	seen.mu.Lock()
	seen.away = true
	seen.mu.Unlock()
	if resp, body := e.post(t, "/webhooks/mailgun", "application/json", event("later@example.org")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("tokens cannot be checked: %d %s, want 503", resp.StatusCode, body)
	}
	if q := e.queuedFeedback(t); len(q) != 1 {
		t.Fatalf("queued %+v", q)
	}
}

// TestSuppressionsAPI lists bounced and complained addresses by page and
// reason, and lifts one by hand.
func TestSuppressionsAPI(t *testing.T) {
	e := newEnv(t, Config{AdminToken: feedbackAdmin})
	ctx := context.Background()
	// The list pages in id order, which is not the order of signing up
	// (an id carries its shard): last is the address with the highest.
	last, lastID := "", int64(0)
	for i, typ := range []store.FeedbackType{store.HardBounce, store.Complaint, store.HardBounce} {
		email := fmt.Sprintf("s%d@example.org", i)
		sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true})
		if err != nil {
			t.Fatal(err)
		}
		if sub.ID > lastID {
			last, lastID = email, sub.ID
		}
		if _, err := e.store.RecordFeedback(ctx, store.Feedback{Email: email, Type: typ}, store.FeedbackPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	var page struct {
		Suppressions []struct{ Email, Status string }
		Next         int64
	}
	code, body := e.adminRaw(t, "GET", "/api/suppressions?limit=2", "")
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Suppressions) != 2 || page.Next == 0 {
		t.Fatalf("page 1: %d %s", code, body)
	}
	code, body = e.adminRaw(t, "GET", fmt.Sprintf("/api/suppressions?limit=2&after=%d", page.Next), "")
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Suppressions) != 1 || page.Suppressions[0].Email != last || page.Next != 0 {
		t.Fatalf("page 2: %d %s", code, body)
	}
	if code, body := e.adminRaw(t, "GET", "/api/suppressions?reason=complained", ""); code != 200 || !strings.Contains(body, "s1@example.org") || strings.Contains(body, "s0@") {
		t.Fatalf("complained only: %d %s", code, body)
	}
	if code, _ := e.adminRaw(t, "GET", "/api/suppressions?reason=active", ""); code != http.StatusBadRequest {
		t.Fatalf("a bad reason: %d", code)
	}
	if code, body := e.adminRaw(t, "DELETE", "/api/suppressions/s0@example.org", ""); code != 200 || !strings.Contains(body, `"status":"active"`) {
		t.Fatalf("lift: %d %s", code, body)
	}
	if code, _ := e.adminRaw(t, "DELETE", "/api/suppressions/s0@example.org", ""); code != http.StatusConflict {
		t.Fatalf("lift again: %d", code)
	}
	if resp, _ := e.get(t, "/api/suppressions"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
}

// TestProviderWebhookGuessingIsSlowed: wrong Postmark credentials use up
// the client's failure budget as wrong admin tokens do, and past it are
// answered 429 after a hold; the provider's right credentials pass at
// once meanwhile.
func TestProviderWebhookGuessingIsSlowed(t *testing.T) {
	const secret = "postmark-token-0123456789"
	var holds []time.Duration
	e := newEnvWithProviders(t, Config{}, map[string]feedback.ProviderWebhook{"postmark": &feedback.Postmark{Token: secret}}, func(d *Deps) {
		d.Guard = adminauth.New("", func(*http.Request) string { return "client" }, nil).
			WithHold(func(d time.Duration) { holds = append(holds, d) })
	})
	post := func(pass string) (int, http.Header) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/webhooks/postmark", strings.NewReader(`{"RecordType":"Open"}`))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("postmark", pass)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for i := range adminauth.FailuresPerMinute {
		if code, _ := post(fmt.Sprint("guess-", i)); code != http.StatusUnauthorized {
			t.Fatalf("wrong credentials %d, within the budget: %d", i+1, code)
		}
	}
	if len(holds) != 0 {
		t.Fatalf("wrong credentials within the budget were held: %v", holds)
	}
	code, h := post("one-guess-too-many")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || len(holds) != 1 {
		t.Fatalf("past the budget: %d, Retry-After %q, holds %v", code, h.Get("Retry-After"), holds)
	}
	if code, _ := post(secret); code != http.StatusOK || len(holds) != 1 {
		t.Fatalf("the right credentials past the budget: %d, holds %v", code, holds)
	}
}

// TestWebhookLogsClipClientValues: an SES request with a topic of almost
// a megabyte is refused with one log line that carries a clipped topic and
// how much was left out, not the megabyte.
func TestWebhookLogsClipClientValues(t *testing.T) {
	var logs logtest.Buffer
	e := newEnvWithProviders(t, Config{}, map[string]feedback.ProviderWebhook{"ses": &feedback.SES{TopicARNs: []string{"arn:aws:sns:eu-west-1:123456789012:bounces"}}}, func(d *Deps) {
		d.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	topic := "arn:aws:sns:" + strings.Repeat("x", 900<<10)
	body, _ := json.Marshal(map[string]string{"Type": "Notification", "Signature": "c2ln", "TopicArn": topic})
	if resp, _ := e.post(t, "/webhooks/ses", "application/json", string(body)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown topic: %d", resp.StatusCode)
	}
	out := logs.String()
	if !strings.Contains(out, "webhook refused") || !strings.Contains(out, "bytes)") {
		t.Fatalf("the refusal's log line lacks the clipped topic: %.400q", out)
	}
	if len(out) > 2*logredact.MaxClientBytes+400 {
		t.Fatalf("the log carries %d bytes for a refused request: the client's topic was copied", len(out))
	}
}
