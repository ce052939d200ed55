package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// freeAddr returns a loopback address that was free a moment ago, never
// one it returned before in this test binary: the package's tests run in
// parallel (redistest.Own), and a port freed by closing the listener could
// otherwise be handed to the next test's service before this one binds it.
func freeAddr(t testing.TB) string {
	t.Helper()
	freeAddrs.Lock()
	defer freeAddrs.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !freeAddrs.given[addr] {
			freeAddrs.given[addr] = true
			return addr
		}
	}
}

var freeAddrs = struct {
	sync.Mutex
	given map[string]bool
}{given: map[string]bool{}}

// service runs `newsletter args...` in-process until the test ends.
type service struct {
	base           string
	stdout, stderr *logtest.Buffer
	done           chan int
	cancel         context.CancelFunc
}

func startService(t testing.TB, env map[string]string, args ...string) *service {
	t.Helper()
	addr := freeAddr(t)
	env["NEWSLETTER_ADDR"] = addr
	if env["NEWSLETTER_BASE_URL"] == "" {
		env["NEWSLETTER_BASE_URL"] = "http://" + addr
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{base: "http://" + addr, stdout: &logtest.Buffer{}, stderr: &logtest.Buffer{}, done: make(chan int, 1), cancel: cancel}
	go func() { s.done <- run(ctx, args, func(k string) string { return env[k] }, s.stdout, s.stderr) }()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("the service's log, last lines:\n%s", lastLines(s.stderr.String(), 40))
		}
	})
	s.waitListening(t)
	return s
}

// startServiceProcess runs the test binary as the service's role (role
// and its flags, as startProcess), listening on an address of its own,
// and returns once it answers.
func startServiceProcess(t *testing.T, role string, env map[string]string) *service {
	t.Helper()
	addr := freeAddr(t)
	env = maps.Clone(env)
	env["NEWSLETTER_ADDR"] = addr
	if env["NEWSLETTER_BASE_URL"] == "" {
		env["NEWSLETTER_BASE_URL"] = "http://" + addr
	}
	startProcess(t, role, env)
	s := &service{base: "http://" + addr}
	s.waitListening(t)
	return s
}

// waitListening waits for the service to answer /healthz.
func (s *service) waitListening(t testing.TB) {
	t.Helper()
	poll.True(t, poll.BusyMachine, "the service to listen", func() bool {
		resp, err := http.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

// lastLines is the end of a log, enough to see why a test failed.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (s *service) stop(t testing.TB) int {
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(poll.BusyMachine):
		t.Fatalf("service did not stop; stderr:\n%s", s.stderr)
	}
	return -1
}

// realEnv is the environment of a service on a real Redis and SMTP server,
// polling fast enough for tests; extra adds to it or overrides it.
func realEnv(redisURL, smtpURL string, extra map[string]string) map[string]string {
	env := map[string]string{
		"NEWSLETTER_REDIS_URL":     redisURL,
		"NEWSLETTER_SMTP_URL":      smtpURL,
		"NEWSLETTER_SECRET":        "integration-test-secret",
		"NEWSLETTER_POLL_INTERVAL": "50ms",
		// These tests send bulk mail without setting a postal address
		// first; the requirement has tests of its own.
		"NEWSLETTER_REQUIRE_POSTAL_ADDRESS": "false",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

var linkPattern = regexp.MustCompile(`https?://\S+`)

// TestSignupFlowOverSMTP is the whole journey against a real Redis (or
// miniredis) and a real SMTP server: subscribe over HTTP, receive the
// confirmation over SMTP, follow its link, receive the welcome with the
// RFC 8058 headers, and leave with one click.
func TestSignupFlowOverSMTP(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN":   "admintoken-0123456789",
		"NEWSLETTER_FROM":          "News <news@example.com>",
		"NEWSLETTER_WELCOME_DELAY": "2s",
	}), "serve")

	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"Flow@Example.com"}})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()

	confirm := smtpSrv.WaitFor(t, 1, poll.BusyMachine)[0]
	if confirm.To[0] != "flow@example.com" || confirm.Header.Get("List-Unsubscribe") != "" {
		t.Fatalf("confirmation: to %v, List-Unsubscribe %q", confirm.To, confirm.Header.Get("List-Unsubscribe"))
	}
	link := ""
	for _, l := range linkPattern.FindAllString(confirm.Text(), -1) {
		if strings.Contains(l, "/confirm?token=") {
			link = strings.TrimRight(l, ".\"'>")
			break
		}
	}
	if !strings.HasPrefix(link, svc.base+"/confirm?token=") {
		t.Fatalf("no confirm link in:\n%s", confirm.Text())
	}
	// The link opens a page (a GET changes nothing); its button POSTs.
	resp, err = http.Get(link)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("confirm link %s: %v %v", link, resp, err)
	}
	resp.Body.Close()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.PostForm(svc.base+"/confirm", url.Values{"token": {u.Query().Get("token")}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("confirm button: %v %v", resp, err)
	}
	resp.Body.Close()
	confirmedAt := time.Now()

	welcome := smtpSrv.WaitFor(t, 2, poll.BusyMachine)[1]
	// asynq keeps scheduled tasks with a whole-second score, so a task
	// may run up to a second before its due time.
	if time.Since(confirmedAt) < time.Second {
		t.Fatal("welcome arrived before the welcome delay")
	}
	if !strings.Contains(welcome.Header.Get("Subject"), "Welcome") {
		t.Fatalf("second mail is %q", welcome.Header.Get("Subject"))
	}
	unsub := strings.Trim(welcome.Header.Get("List-Unsubscribe"), "<>")
	if !strings.HasPrefix(unsub, svc.base+"/unsubscribe?token=") || welcome.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("RFC 8058 headers: %q / %q", welcome.Header.Get("List-Unsubscribe"), welcome.Header.Get("List-Unsubscribe-Post"))
	}
	// The footer's visible link opens the preference centre.
	prefs := regexp.MustCompile(`Unsubscribe or change what you get: (\S+)`).FindStringSubmatch(welcome.Text())
	if prefs == nil || !strings.HasPrefix(prefs[1], svc.base+"/preferences?token=") || !strings.Contains(welcome.HTML(), `href="`+prefs[1]+`"`) {
		t.Fatal("no visible unsubscribe link (to the preference centre) in the welcome body")
	}
	if got := welcome.Header.Get("List-Id"); got != "Weekly digest <digest.newsletter.example.com>" {
		t.Fatalf("the welcome's List-Id %q: the sequence's topic's", got)
	}

	// What a mailbox provider does for one-click: POST, no cookies.
	resp, err = http.Post(unsub, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", svc.base+"/api/subscribers/flow@example.com", nil)
	req.Header.Set("Authorization", "Bearer admintoken-0123456789")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The welcome belongs to the sequence's topic (digest): one click
	// leaves that, and the updates the person also chose go on.
	if !strings.Contains(string(body), `"status":"active"`) || !strings.Contains(string(body), `"topics":["updates"]`) {
		t.Fatalf("after one-click: %s", body)
	}
	if len(smtpSrv.Messages()) != 2 {
		t.Fatalf("%d mails, want exactly confirm + welcome", len(smtpSrv.Messages()))
	}

	// The operator's view of the same run.
	resp, err = http.Get(svc.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`asynq_queue_size{queue="transactional"}`, `asynq_queue_size{queue="default"}`,
		`newsletter_tasks_total{lane="email",queue="transactional",result="success",type="email:confirm"} 1`,
		`newsletter_emails_sent_total{kind="welcome"} 1`,
		`newsletter_http_requests_total{code="202",route="POST /subscribe"} 1`,
	} {
		if !strings.Contains(string(metricsText), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	mon := func(user, pass string) int {
		req, _ := http.NewRequest("GET", svc.base+"/monitoring/", nil)
		if pass != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := mon("", ""); c != 401 {
		t.Fatalf("asynqmon without credentials: %d", c)
	}
	if c := mon("admin", "admintoken-0123456789"); c != 200 {
		t.Fatalf("asynqmon with the admin token: %d", c)
	}
	// asynqmon's own API: a page elsewhere cannot pause our queue through
	// a logged-in operator's browser; asynqmon's own page can.
	pause := func(origin string) int {
		req, _ := http.NewRequest("POST", svc.base+"/monitoring/api/queues/default:pause", nil)
		req.SetBasicAuth("admin", "admintoken-0123456789")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	paused := func() bool {
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo("default")
		return err == nil && info.Paused
	}
	if c := pause("https://evil.example"); c != http.StatusForbidden || paused() {
		t.Fatalf("pause from a foreign origin: %d, paused %v", c, paused())
	}
	if c := pause(svc.base); c/100 != 2 || !paused() {
		t.Fatalf("pause from our own origin: %d, paused %v", c, paused())
	}
	if code := svc.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, svc.stderr)
	}
	// The whole signup-to-welcome path logged, and never the address:
	// its domain and a hash stand for it, task IDs included.
	logs := svc.stderr.String()
	if strings.Contains(logs, "flow@") || !strings.Contains(logs, "example.com#") {
		t.Fatalf("the log shows the address, or no pseudonym at all:\n%s", logs)
	}
}

// TestUnsubscribeInWindowStopsWelcome runs the real worker: an unsubscribe
// inside the welcome delay means no welcome, ever. The API runs alone until
// the unsubscribe has answered, so the window is open by construction, not
// by how fast this machine is; then a worker starts and sends what is due.
func TestUnsubscribeInWindowStopsWelcome(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := func() map[string]string {
		return realEnv(redisURL, smtpSrv.URL(), map[string]string{
			"NEWSLETTER_DOUBLE_OPTIN":  "false",
			"NEWSLETTER_WELCOME_DELAY": "1s",
		})
	}
	svc := startService(t, env(), "api")
	post := func(path, email string) {
		resp, err := http.Post(svc.base+path, "application/json", strings.NewReader(`{"email":"`+email+`"}`))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s %s: %v %v", path, email, resp, err)
		}
		resp.Body.Close()
	}
	post("/subscribe", "leaves@example.com")
	post("/subscribe", "stays@example.com")
	post("/unsubscribe", "leaves@example.com")
	startService(t, env(), "worker")
	// The welcome of the one who stayed is the marker that the window has
	// passed for both.
	smtpSrv.WaitFor(t, 1, poll.BusyMachine)
	// And the leaver's welcome is gone from the queue (deleted, or run and
	// skipped by the re-check), so it cannot still arrive.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.True(t, poll.BusyMachine, "the leaver's welcome to leave the queue", func() bool {
		_, err := insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("leaves@example.com"))
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	if got := smtpSrv.To("leaves@example.com"); len(got) != 0 {
		t.Fatalf("welcome sent after unsubscribe")
	}
	if len(smtpSrv.To("stays@example.com")) != 1 {
		t.Fatal("the subscriber who stayed got no welcome")
	}
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve"}, func(k string) string {
		return map[string]string{"NEWSLETTER_CONCURRENCY": "many", "NEWSLETTER_WELCOME_DELAY": "5 minutes"}[k]
	}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "NEWSLETTER_CONCURRENCY:") || !strings.Contains(errb.String(), "NEWSLETTER_WELCOME_DELAY:") {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	if code := run(context.Background(), []string{"frobnicate"}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
}

func TestEmbeddedBanner(t *testing.T) {
	// The links in mails go elsewhere; the banner shows where this process
	// listens (127.0.0.1:port), not NEWSLETTER_BASE_URL.
	svc := startService(t, map[string]string{"NEWSLETTER_BASE_URL": "http://localhost:8080"}, "serve")
	// The banner is printed once every part has started, which can be
	// after the HTTP server answers: wait for its last line.
	poll.True(t, poll.BusyMachine, "the whole banner", func() bool {
		return strings.Contains(svc.stdout.String(), "nothing survives a restart")
	})
	out := svc.stdout.String()
	if strings.Contains(out, "http://localhost:8080/") || !strings.Contains(out, "signup form      "+svc.base+"/") {
		t.Errorf("the banner does not show the address it listens on (%s):\n%s", svc.base, out)
	}
	for _, want := range []string{"signup form", "/dev/mailbox", "NEWSLETTER_REDIS_URL=redis://127.0.0.1:", "nothing survives a restart", "Bearer ", "links in mails   http://localhost:8080"} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	resp, err := http.Get(svc.base + "/dev/mailbox")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("dev mailbox: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestDevMailboxOnlyInDevelopment: with a real Redis and no SMTP server the
// worker refuses to start, unless NEWSLETTER_DEV_MAILBOX is set; then the
// mailbox, which shows every confirm and unsubscribe link, needs the admin
// token. A configured token is never printed.
func TestDevMailboxOnlyInDevelopment(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "integration-test-secret", "NEWSLETTER_ADDR": "127.0.0.1:0"}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "NEWSLETTER_SMTP_URL: want an SMTP server") {
		t.Fatalf("a real Redis without SMTP started: exit %d\n%s", code, errb.String())
	}
	env["NEWSLETTER_DEV_MAILBOX"] = "true"
	env["NEWSLETTER_ADMIN_TOKEN"] = "dev-mailbox-token-0123"
	svc := startService(t, env, "serve")
	get := func(user, pass string) *http.Response {
		req, _ := http.NewRequest("GET", svc.base+"/dev/mailbox", nil)
		if pass != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	if resp := get("", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the mailbox without the token: %s", resp.Status)
	}
	resp := get("admin", "dev-mailbox-token-0123")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("the mailbox with the token: %s %v", resp.Status, resp.Header)
	}
	poll.True(t, poll.BusyMachine, "the banner", func() bool { return strings.Contains(svc.stdout.String(), "metrics ") })
	if strings.Contains(svc.stdout.String(), "dev-mailbox-token-0123") {
		t.Fatalf("the configured admin token was printed:\n%s", svc.stdout.String())
	}
}
