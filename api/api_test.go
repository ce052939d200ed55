package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

type env struct {
	srv    *httptest.Server
	rdb    *redis.Client
	store  store.Store
	insp   *asynq.Inspector
	signer *token.Signer
	queue  *countingQueue
}

// countingQueue wraps the real client and can fail the next enqueues.
type countingQueue struct {
	tasks.Enqueuer
	failNext int
}

func (q *countingQueue) EnqueueContext(ctx context.Context, t *asynq.Task, o ...asynq.Option) (*asynq.TaskInfo, error) {
	if q.failNext > 0 {
		q.failNext--
		return nil, errors.New("redis: connection refused")
	}
	return q.Enqueuer.EnqueueContext(ctx, t, o...)
}

func newEnv(t *testing.T, cfg Config) *env { t.Helper(); return newEnvWith(t, cfg, nil) }

// newEnvWith is newEnv with deps changed by more (when not nil).
func newEnvWith(t *testing.T, cfg Config, more func(*Deps)) *env {
	t.Helper()
	return newEnvWithProviders(t, cfg, nil, more)
}

// newEnvWithProviders is newEnvWith with the e-mail providers' webhooks
// mounted beside the API, as the binary mounts them.
func newEnvWithProviders(t *testing.T, cfg Config, providers map[string]feedback.ProviderWebhook, more func(*Deps)) *env {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb).WithTopics(cfg.Topics)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	signer := token.NewSigner([]byte("0123456789abcdef"), 0)
	reg := prometheus.NewRegistry()
	q := &countingQueue{Enqueuer: client}
	jobs := tasks.NewDispatcher(q, st, nil)
	t.Cleanup(jobs.Close)
	deps := Deps{
		Store: st, Jobs: jobs, Queue: client, Tasks: insp, Signer: signer, Metrics: NewMetrics(reg),
		MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		ListJobs:       listjobs.NewJobs(rdb),
		Checks:         testChannelChecks(reg),
	}
	if cfg.SMSCodesPerClient == 0 {
		cfg.SMSCodesPerClient = sms.DefaultCodesPerClient // the binary's default
	}
	if more != nil {
		more(&deps)
	}
	if deps.Webhooks == nil {
		deps.Webhooks = &webhooks.Service{Store: st, Queue: deps.Queue, Guard: cfg.Endpoints, NewSecret: webhook.NewSecret, Now: deps.Now}
	}
	if len(providers) > 0 && deps.Guard == nil { // New's, made here to share it with the providers' webhooks
		deps.Guard = adminauth.New(cfg.AdminToken, cfg.Clients.Key, deps.Now)
		if deps.Tokens != nil {
			deps.Guard.WithTokens(deps.Tokens)
		}
	}
	s := New(cfg, deps)
	for name, wh := range providers {
		s.Handle("POST /webhooks/"+name, &feedback.WebhookHandler{
			Source: name, Webhook: wh, Queue: testProviderEvents{deps.Queue}, Failures: deps.Guard, Log: deps.Log,
		})
	}
	if cfg.SMSAuthToken != "" { // beside the API, as the binary mounts it
		s.Handle("POST "+sms.CallbackPath, &sms.CallbackHandler{
			AuthToken: cfg.SMSAuthToken, Origin: cfg.Origin, Store: st, Log: deps.Log,
			States: sms.NumberStates{Stopped: store.NumberStopped, On: store.NumberOn, Retired: store.NumberRetired},
		})
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &env{srv: srv, rdb: rdb, store: st, insp: insp, signer: signer, queue: q}
}

// sign is a token for purpose p to the subscriber with address email,
// as the mails carry it (by id).
func (e *env) sign(t *testing.T, p token.Purpose, email string) string {
	t.Helper()
	return e.signTopic(t, p, email, "")
}

// signTopic is sign for a link that leaves one topic.
func (e *env) signTopic(t *testing.T, p token.Purpose, email, topic string) string {
	t.Helper()
	sub, err := e.store.Get(context.Background(), email)
	if err != nil {
		t.Fatalf("token for %s: %v", email, err)
	}
	return e.signer.SignTopic(p, sub.ID, topic)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *env) post(t *testing.T, path, contentType, body string) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Post(e.srv.URL+path, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) taskCount(t *testing.T, queue string) int {
	t.Helper()
	info, err := e.insp.GetQueueInfo(queue)
	if err != nil {
		return 0
	}
	return info.Size
}

func (e *env) status(t *testing.T, email string) store.Status {
	t.Helper()
	sub, err := e.store.Get(context.Background(), email)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return sub.Status
}

const jsonCT = "application/json"

func TestSubscribeDoubleOptIn(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, WelcomeDelay: time.Hour})
	resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"  Ann@Example.COM "}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, `"pending"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if e.status(t, "ann@example.com") != store.Pending {
		t.Fatal("not stored as pending under the normalised address")
	}
	info, err := e.insp.GetTaskInfo(tasks.QueueTransactional, "confirm:ann@example.com")
	if err != nil || info.Type != tasks.TypeConfirmEmail {
		t.Fatalf("confirm task: %+v %v", info, err)
	}
	// The same address again while the confirmation waits: no second task.
	resp, _ = e.post(t, "/subscribe", "application/x-www-form-urlencoded", "email=ann%40example.com")
	if resp.StatusCode != http.StatusAccepted || e.taskCount(t, tasks.QueueTransactional) != 1 {
		t.Fatalf("duplicate subscribe: %d, %d tasks", resp.StatusCode, e.taskCount(t, tasks.QueueTransactional))
	}
}

func TestSubscribeActiveIs409(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, WelcomeDelay: time.Hour})
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"a@example.com"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	if e.status(t, "a@example.com") != store.Active || e.taskCount(t, tasks.QueueDefault) != 1 {
		t.Fatal("without double opt-in, subscribe activates and schedules the welcome")
	}
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"A@example.com"}`); resp.StatusCode != http.StatusConflict {
		t.Fatalf("already active: %d", resp.StatusCode)
	}
	if e.taskCount(t, tasks.QueueDefault) != 1 {
		t.Fatal("a second welcome was queued")
	}
}

func TestSubscribeRejectsBadInput(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, MaxBody: 1024})
	cases := []struct {
		ct, body string
		code     int
	}{
		{jsonCT, `{"email":`, 400},
		{jsonCT, `{"email":42}`, 400},
		{jsonCT, `{}`, 400},
		{jsonCT, `{"email":""}`, 400},
		{jsonCT, `{"email":"not an address"}`, 400},
		{jsonCT, `{"email":"a@example.com\r\nBcc: victim@example.com"}`, 400},
		{jsonCT, `{"email":"Ann <a@example.com>"}`, 400},
		{jsonCT, `{"email":"a@example.com","timezone":"Mars/Olympus"}`, 400},
		{jsonCT, `{"email":"a@example.com","name":"x\ny"}`, 400},
		{"application/x-www-form-urlencoded", "email=a%40example.com%0d%0aBcc%3a+x%40y.z", 400},
		{"application/x-www-form-urlencoded", "", 400},
		{jsonCT, `{"email":"` + strings.Repeat("a", 4000) + `@example.com"}`, 413},
	}
	for _, c := range cases {
		resp, body := e.post(t, "/subscribe", c.ct, c.body)
		if resp.StatusCode != c.code {
			t.Errorf("%.60q: %d, want %d (%s)", c.body, resp.StatusCode, c.code, body)
		}
	}
	if n := e.taskCount(t, tasks.QueueTransactional); n != 0 {
		t.Fatalf("bad input queued %d tasks", n)
	}
	for _, email := range []string{"a@example.com", "not an address"} {
		if s := e.status(t, email); s != "" {
			t.Fatalf("bad input stored %s as %s", email, s)
		}
	}
	// The form gets its page back with the message, not JSON.
	resp, body := e.post(t, "/subscribe", "application/x-www-form-urlencoded", "email=nope")
	if resp.StatusCode != 400 || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, "<form") {
		t.Fatalf("form error page: %d\n%s", resp.StatusCode, body)
	}
}

func TestConfirmLink(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, WelcomeDelay: time.Hour})
	e.post(t, "/subscribe", jsonCT, `{"email":"c@example.com"}`)
	if resp, _ := e.get(t, "/confirm?token="+url.QueryEscape(e.sign(t, token.Unsubscribe, "c@example.com"))); resp.StatusCode != 400 {
		t.Fatalf("an unsubscribe token confirmed: %d", resp.StatusCode)
	}
	if resp, _ := e.get(t, "/confirm?token=garbage"); resp.StatusCode != 400 {
		t.Fatalf("garbage token: %d", resp.StatusCode)
	}
	if e.status(t, "c@example.com") != store.Pending {
		t.Fatal("a bad token changed the subscriber")
	}
	tok := e.sign(t, token.Confirm, "c@example.com")
	link := "/confirm?token=" + url.QueryEscape(tok)
	// What a mail scanner does: GET and HEAD the link. Nothing changes;
	// the page holds a button that POSTs.
	resp, body := e.get(t, link)
	if resp.StatusCode != 200 || !strings.Contains(body, `action="/confirm"`) || !strings.Contains(body, `method="post"`) {
		t.Fatalf("confirm page: %d %s", resp.StatusCode, body)
	}
	head, err := http.Head(e.srv.URL + link)
	if err != nil {
		t.Fatal(err)
	}
	_ = head.Body.Close()
	if e.status(t, "c@example.com") != store.Pending {
		t.Fatal("a GET or HEAD of the confirm link confirmed: a link scanner would opt people in")
	}
	resp, body = e.post(t, "/confirm", "application/x-www-form-urlencoded", "token="+url.QueryEscape(tok))
	if resp.StatusCode != 200 || !strings.Contains(body, "confirmed") || e.status(t, "c@example.com") != store.Active {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	info, err := e.insp.GetTaskInfo(tasks.QueueDefault, "welcome:c@example.com")
	if err != nil || info.State != asynq.TaskStateScheduled || info.MaxRetry != 5 || info.Timeout != 2*time.Minute {
		t.Fatalf("welcome task: %+v %v", info, err)
	}
	if d := time.Until(info.NextProcessAt); d < 55*time.Minute || d > time.Hour+time.Minute {
		t.Fatalf("welcome due in %s, want the welcome delay", d)
	}
	// A second click is harmless.
	if resp, body := e.post(t, "/confirm", "application/x-www-form-urlencoded", "token="+url.QueryEscape(tok)); resp.StatusCode != 200 || !strings.Contains(body, "Already confirmed") {
		t.Fatalf("second click: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.post(t, "/confirm", "application/x-www-form-urlencoded", "token=garbage"); resp.StatusCode != 400 {
		t.Fatalf("a POST with a bad token: %d", resp.StatusCode)
	}
}

func TestUnsubscribeInsideWelcomeWindow(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, WelcomeDelay: time.Hour})
	e.post(t, "/subscribe", jsonCT, `{"email":"w@example.com"}`)
	if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, "welcome:w@example.com"); err != nil {
		t.Fatal("welcome not scheduled: ", err)
	}
	resp, _ := e.post(t, "/unsubscribe", jsonCT, `{"email":"W@example.com"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatal(resp.StatusCode)
	}
	// Inactive before the answer, and the scheduled welcome is gone.
	if e.status(t, "w@example.com") != store.Unsubscribed {
		t.Fatal("still active after 202")
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, "welcome:w@example.com"); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatalf("welcome task survived the unsubscribe: %v", err)
	}
	// Nor can the relay bring it back.
	due, _ := e.store.OutboxDue(context.Background(), time.Now().Add(2*time.Hour), 10)
	if len(due) != 0 {
		t.Fatalf("outbox still holds %+v", due)
	}
}

func TestUnsubscribeUnknownAddressLooksTheSame(t *testing.T) {
	e := newEnv(t, Config{})
	if resp, _ := e.post(t, "/unsubscribe", jsonCT, `{"email":"stranger@example.com"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	if resp, _ := e.post(t, "/unsubscribe", jsonCT, `{"email":"bad"}`); resp.StatusCode != 400 {
		t.Fatal(resp.StatusCode)
	}
}

func TestOneClickUnsubscribe(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, WelcomeDelay: time.Hour})
	for i, form := range []string{"urlencoded", "multipart"} {
		email := []string{"u1@example.com", "u2@example.com"}[i]
		e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`)
		tok := url.QueryEscape(e.sign(t, token.Unsubscribe, email))
		// GET shows a page and changes nothing.
		resp, body := e.get(t, "/unsubscribe?token="+tok)
		if resp.StatusCode != 200 || !strings.Contains(body, "<form") || e.status(t, email) != store.Active {
			t.Fatalf("GET unsubscribed or failed: %d", resp.StatusCode)
		}
		var ct, payload string
		if form == "urlencoded" {
			ct, payload = "application/x-www-form-urlencoded", "List-Unsubscribe=One-Click"
		} else {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			mw.WriteField("List-Unsubscribe", "One-Click")
			mw.Close()
			ct, payload = mw.FormDataContentType(), buf.String()
		}
		resp, _ = e.post(t, "/unsubscribe?token="+tok, ct, payload)
		if resp.StatusCode != 200 || resp.Header.Get("Location") != "" || len(resp.Cookies()) != 0 {
			t.Fatalf("%s one-click: %d location=%q", form, resp.StatusCode, resp.Header.Get("Location"))
		}
		if e.status(t, email) != store.Unsubscribed {
			t.Fatalf("%s one-click did not unsubscribe", form)
		}
	}
	// A confirm token cannot unsubscribe.
	e.post(t, "/subscribe", jsonCT, `{"email":"u3@example.com"}`)
	resp, _ := e.post(t, "/unsubscribe?token="+url.QueryEscape(e.sign(t, token.Confirm, "u3@example.com")), "application/x-www-form-urlencoded", "List-Unsubscribe=One-Click")
	if resp.StatusCode != 400 || e.status(t, "u3@example.com") != store.Active {
		t.Fatalf("confirm token unsubscribed: %d", resp.StatusCode)
	}
}

func TestEnqueueFailureStillAccepts(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true})
	e.queue.failNext = 1
	resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"blip@example.com"}`)
	if resp.StatusCode != 202 || e.status(t, "blip@example.com") != store.Pending {
		t.Fatalf("%d", resp.StatusCode)
	}
	due, _ := e.store.OutboxDue(context.Background(), time.Now().Add(time.Minute), 10)
	if len(due) != 1 || due[0].ID != "confirm:blip@example.com" {
		t.Fatalf("the outbox must keep the confirmation for the relay: %+v", due)
	}
}

func TestSubscribeRateLimit(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, SubscribeRate: 3})
	codes := []int{}
	for i := 0; i < 5; i++ {
		resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"r`+string(rune('a'+i))+`@example.com"}`)
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if codes[0] != 202 || codes[2] != 202 || codes[3] != 429 || codes[4] != 429 {
		t.Fatalf("codes %v, want 3×202 then 429", codes)
	}
}

func TestAdminSubscriberAndMetrics(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, AdminToken: "s3cret"})
	e.post(t, "/subscribe", jsonCT, `{"email":"adm@example.com","timezone":"Europe/Berlin"}`)
	get := func(auth string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/subscribers/adm@example.com", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	if resp, _ := get(""); resp.StatusCode != 401 {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	if resp, _ := get("wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	resp, m := get("s3cret")
	if resp.StatusCode != 200 || m["status"] != "pending" || m["timezone"] != "Europe/Berlin" || m["created_at"] == nil {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	for _, k := range []string{"email", "status", "timezone", "created_at", "confirmed_at", "unsubscribed_at"} {
		if _, ok := m[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
	_, body := e.get(t, "/metrics")
	if !strings.Contains(body, `newsletter_http_requests_total{code="202",route="POST /subscribe"} 1`) {
		t.Fatalf("metrics by route pattern missing:\n%s", body)
	}
	if strings.Contains(body, "adm@example.com") {
		t.Fatal("an address leaked into a metric label")
	}
}

func TestAdminClosedWithoutToken(t *testing.T) {
	e := newEnv(t, Config{})
	if resp, _ := e.get(t, "/api/subscribers/a@example.com"); resp.StatusCode != 404 {
		t.Fatalf("admin route open without a token: %d", resp.StatusCode)
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, Config{})
	for _, p := range []string{"/healthz", "/readyz", "/"} {
		if resp, _ := e.get(t, p); resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

// TestForwardedForOnlyFromTrustedProxies: behind a trusted proxy each
// visitor has a bucket of their own; from anywhere else the header is the
// client's own word and ignored.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	trusted, err := clientip.Parse("127.0.0.1/32, ::1/128") // the test client comes from loopback
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		clients clientip.Resolver
		want    []int
	}{
		{"behind a trusted proxy", trusted, []int{202, 202, 202, 202}},
		{"no trusted proxy", clientip.Resolver{}, []int{202, 429, 429, 429}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Config{DoubleOptIn: true, SubscribeRate: 1, Clients: c.clients})
			var got []int
			for i := 0; i < 4; i++ {
				req, _ := http.NewRequest("POST", e.srv.URL+"/subscribe", strings.NewReader(`{"email":"xff`+strconv.Itoa(i)+`@example.com"}`))
				req.Header.Set("Content-Type", jsonCT)
				req.Header.Set("X-Forwarded-For", "198.51.100."+strconv.Itoa(i+1))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				got = append(got, resp.StatusCode)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

// TestIDNSpellingsAreOneSubscriber: a domain in Unicode and in Punycode is
// one address, stored and mailed in its ASCII form.
func TestIDNSpellingsAreOneSubscriber(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true})
	for _, email := range []string{"user@bücher.de", "User@XN--BCHER-KVA.de"} {
		if resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s", email, resp.StatusCode, body)
		}
	}
	sub, err := e.store.Get(context.Background(), "user@xn--bcher-kva.de")
	if err != nil || sub.Email != "user@xn--bcher-kva.de" {
		t.Fatalf("the ASCII form: %+v %v", sub, err)
	}
	if _, err := e.store.Get(context.Background(), "user@bücher.de"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second subscriber under the Unicode form: %v", err)
	}
	if n := e.taskCount(t, tasks.QueueTransactional); n != 1 {
		t.Fatalf("%d confirmation tasks, want 1", n)
	}
	// A local part outside ASCII is refused at signup, not left to fail
	// at a server without SMTPUTF8.
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"jürgen@example.com"}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("non-ASCII local part: %d", resp.StatusCode)
	}
}

// TestSignupBombingSendsOneConfirmation: six signups of one pending address
// (each after the previous confirmation went out) make one confirmation;
// every one is answered the same. Without the hold each made one.
func TestSignupBombingSendsOneConfirmation(t *testing.T) {
	for _, c := range []struct {
		name string
		hold store.ConfirmHold
		want int
	}{
		{"with the cooldown", store.ConfirmHold{Every: time.Hour, PerDay: ConfirmationsPerDay}, 1},
		{"without", store.ConfirmHold{}, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Config{DoubleOptIn: true, ConfirmHold: c.hold})
			sent := 0
			for i := 0; i < 6; i++ {
				resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"victim@example.com","name":"WIN a prize at https://evil.example/"}`)
				if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, `"status":"pending"`) {
					t.Fatalf("signup %d: %d %s", i+1, resp.StatusCode, body)
				}
				// The worker sends the confirmation: the task leaves the
				// queue and its TaskID is free again.
				if err := e.insp.DeleteTask(tasks.QueueTransactional, tasks.ConfirmTaskID("victim@example.com")); err == nil {
					sent++
				}
			}
			if sent != c.want {
				t.Fatalf("%d confirmations queued, want %d", sent, c.want)
			}
		})
	}
}

// TestHoneypot: a signup that fills the hidden field is answered like any
// other, stores nothing and is counted.
func TestHoneypot(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true})
	resp, body := e.post(t, "/subscribe", "application/x-www-form-urlencoded", "email=bot%40example.com&website=http%3A%2F%2Fspam.example")
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "Check your inbox") {
		t.Fatalf("honeypot: %d %s", resp.StatusCode, body)
	}
	if _, err := e.store.Get(context.Background(), "bot@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the bot was stored: %v", err)
	}
	if n := e.taskCount(t, tasks.QueueTransactional); n != 0 {
		t.Fatalf("%d confirmations queued for a bot", n)
	}
	_, metrics := e.get(t, "/metrics")
	if !strings.Contains(metrics, "newsletter_signup_honeypot_total 1") {
		t.Fatalf("the honeypot was not counted:\n%s", metrics)
	}
}

// countingDeleter counts DeleteTask calls.
type countingDeleter struct {
	TaskDeleter
	calls atomic.Int64
}

func (c *countingDeleter) DeleteTask(queue, id string) error {
	c.calls.Add(1)
	return c.TaskDeleter.DeleteTask(queue, id)
}

// TestUnsubscribeByAddressIsGuarded: a form on another site cannot
// unsubscribe anyone (nor a form post that names no page); our own page
// and programs can; the path is rate-limited per client; a stranger's
// address costs the same work as a subscriber's.
func TestUnsubscribeByAddressIsGuarded(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, SubscribeRate: 4, Origin: "https://news.example.com"})
	del := &countingDeleter{TaskDeleter: e.insp}
	e.srv.Config.Handler = New(Config{DoubleOptIn: false, SubscribeRate: 4, Origin: "https://news.example.com"}, Deps{
		Store: e.store, Jobs: tasks.NewDispatcher(e.queue, e.store, nil), Queue: e.queue, Tasks: del, Signer: e.signer,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, email := range []string{"stay@example.com", "leave@example.com"} {
		e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`)
	}
	post := func(origin, ct, body string) int {
		req, _ := http.NewRequest("POST", e.srv.URL+"/unsubscribe", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	form := "application/x-www-form-urlencoded"
	if c := post("https://evil.example", form, "email=stay%40example.com"); c != http.StatusForbidden {
		t.Fatalf("a cross-site form: %d", c)
	}
	if c := post("", form, "email=stay%40example.com"); c != http.StatusForbidden {
		t.Fatalf("a form post naming no page: %d", c)
	}
	if e.status(t, "stay@example.com") != store.Active {
		t.Fatal("a refused request unsubscribed someone")
	}
	if c := post("https://news.example.com", form, "email=leave%40example.com"); c != http.StatusAccepted || e.status(t, "leave@example.com") != store.Unsubscribed {
		t.Fatalf("our own page: %d", c)
	}
	// A subscriber and a stranger: the same calls behind the same answer.
	del.calls.Store(0)
	if c := post("", jsonCT, `{"email":"nobody@example.com"}`); c != http.StatusAccepted {
		t.Fatalf("a program, a stranger's address: %d", c)
	}
	stranger := del.calls.Load()
	if stranger == 0 {
		t.Fatal("a stranger's unsubscribe skipped the work a subscriber's does")
	}
	// The fifth address-only request of this client within the minute
	// (the cross-site ones counted too) is refused.
	if c := post("", jsonCT, `{"email":"stay@example.com"}`); c != http.StatusTooManyRequests {
		t.Fatalf("over the rate: %d", c)
	}
}

// TestUnsubscribeByEmailConfirm: in confirm mode an address alone changes
// nothing; it queues a link to the address, for members and strangers
// alike.
func TestUnsubscribeByEmailConfirm(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, UnsubscribeByEmail: UnsubscribeConfirm})
	e.post(t, "/subscribe", jsonCT, `{"email":"keep@example.com"}`)
	for _, email := range []string{"keep@example.com", "nobody@example.com"} {
		resp, body := e.post(t, "/unsubscribe", jsonCT, `{"email":"`+email+`"}`)
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "link sent") {
			t.Fatalf("%s: %d %s", email, resp.StatusCode, body)
		}
		if _, err := e.insp.GetTaskInfo(tasks.QueueTransactional, tasks.UnsubscribeLinkTaskID(email)); err != nil {
			t.Fatalf("%s: no link queued: %v", email, err)
		}
	}
	if e.status(t, "keep@example.com") != store.Active {
		t.Fatal("an address alone unsubscribed in confirm mode")
	}
}

// TestTestMailOneClickIsInert: the one-click POST of a test mail's
// List-Unsubscribe URL (token InertToken) answers 200, as RFC 8058 wants,
// and unsubscribes nobody.
func TestTestMailOneClickIsInert(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false})
	if resp, _ := e.post(t, "/subscribe", formCT, "email=reader%40example.com"); resp.StatusCode != http.StatusAccepted {
		t.Fatal(resp.StatusCode)
	}
	resp, body := e.post(t, "/unsubscribe?token="+InertToken, formCT, "List-Unsubscribe=One-Click")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a test mail's one-click: %d %s", resp.StatusCode, body)
	}
	if st := e.status(t, "reader@example.com"); st != store.Active {
		t.Fatalf("a test mail's one-click changed a subscriber: %s", st)
	}
}
