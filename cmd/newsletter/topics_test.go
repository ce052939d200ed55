package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const topicsAdmin = "topics-admin-token-0123"

// subjects are the subjects of the mails an address got, in order.
func subjects(srv *smtptest.Server, rcpt string) []string {
	var out []string
	for _, m := range srv.To(rcpt) {
		out = append(out, m.Header.Get("Subject"))
	}
	return out
}

// footerLink is the preference centre's link at the foot of a mail.
var footerLink = regexp.MustCompile(`Unsubscribe or change what you get: (\S+)`)

// A one-click from a digest leaves the digest only: the next event still
// arrives. Leaving everything in the preference centre stops every kind
// of mail: neither the next digest nor the next event comes.
func TestPerTopicUnsubscribeEndToEnd(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": topicsAdmin, "NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_WELCOME_DELAY": "1h",
		"NEWSLETTER_GROUP_GRACE": "1s", "NEWSLETTER_GROUP_MAX_DELAY": "2s",
	}), "serve")
	st := versionedStore(t, rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	ctx := context.Background()
	// reader leaves topic by topic; witness stays and marks when each
	// mail has gone out.
	for _, email := range []string{"reader@example.com", "witness@example.com"} {
		svc.post(t, "/subscribe", `{"email":"`+email+`","topics":["digest","updates"]}`, "", http.StatusAccepted)
	}
	svc.post(t, "/api/items", `{"title":"One","url":"https://example.com/1"}`, topicsAdmin, http.StatusCreated)
	svc.post(t, "/api/digest/run", `{"period":"2026-W50"}`, topicsAdmin, http.StatusAccepted)
	poll.True(t, poll.BusyMachine, "both digests", func() bool {
		return len(smtpSrv.To("reader@example.com")) == 1 && len(smtpSrv.To("witness@example.com")) == 1
	})
	digest := smtpSrv.To("reader@example.com")[0]
	if got := digest.Header.Get("List-Id"); got != "Weekly digest <digest.newsletter.localhost>" {
		t.Fatalf("digest List-Id %q", got)
	}
	// The mailbox provider's one-click: POST, no cookies, no redirect.
	unsub := strings.Trim(digest.Header.Get("List-Unsubscribe"), "<>")
	resp, err := http.Post(unsub, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	sub, err := st.Get(ctx, "reader@example.com")
	if err != nil || sub.Status != store.Active || !slices.Equal(sub.Topics, []string{"updates"}) {
		t.Fatalf("after the digest's one-click: %+v %v", sub, err)
	}
	// The next event reaches the reader: updates are still on.
	for _, email := range []string{"reader@example.com", "witness@example.com"} {
		svc.post(t, "/api/events", `{"email":"`+email+`","title":"Your export is ready","url":"https://example.com/e"}`, topicsAdmin, http.StatusAccepted)
	}
	// The witness's too: an event still waiting in its bundle when the
	// next one is posted goes out with it, one mail for two (so the count
	// below would never reach four).
	poll.True(t, poll.BusyMachine, "the reader's and the witness's event", func() bool {
		return len(smtpSrv.To("reader@example.com")) == 2 && len(smtpSrv.To("witness@example.com")) == 2
	})
	event := smtpSrv.To("reader@example.com")[1]
	if got := event.Header.Get("List-Id"); got != "Product updates <updates.newsletter.localhost>" || !strings.Contains(event.Text(), "Your export is ready") {
		t.Fatalf("event mail: List-Id %q\n%s", got, event.Data)
	}

	// The preference centre, from the event's footer: leave everything.
	m := footerLink.FindStringSubmatch(event.Text())
	if m == nil {
		t.Fatalf("no preferences link in the event mail:\n%s", event.Text())
	}
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, err := http.Get(m[1])
	if err != nil || page.StatusCode != http.StatusOK {
		t.Fatalf("preference page: %v %v", page, err)
	}
	page.Body.Close()
	req, _ := http.NewRequest("POST", svc.base+"/preferences", strings.NewReader(url.Values{"token": {u.Query().Get("token")}, "leave": {"all"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", svc.base) // the page's own form
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("leave everything: %v %v", resp, err)
	}
	resp.Body.Close()
	if sub, _ := st.Get(ctx, "reader@example.com"); sub.Status != store.Unsubscribed || len(sub.Topics) != 0 {
		t.Fatalf("after leaving everything: %+v", sub)
	}
	// A digest and an event for both: the witness gets them, the reader
	// nothing more.
	svc.post(t, "/api/items", `{"title":"Two","url":"https://example.com/2"}`, topicsAdmin, http.StatusCreated)
	svc.post(t, "/api/digest/run", `{"period":"2026-W51"}`, topicsAdmin, http.StatusAccepted)
	for _, email := range []string{"reader@example.com", "witness@example.com"} {
		svc.post(t, "/api/events", `{"email":"`+email+`","title":"Another","url":"https://example.com/f"}`, topicsAdmin, http.StatusAccepted)
	}
	poll.True(t, poll.BusyMachine, "the witness's second digest and event", func() bool { return len(smtpSrv.To("witness@example.com")) == 4 })
	// The reader's event bundle is handled in the same group window as
	// the witness's; its task must be gone (skipped) before we look.
	poll.True(t, poll.BusyMachine, "the reader's event task to be done", func() bool {
		return noTasks(t, insp, tasks.QueueDefault, tasks.TypeFanout, tasks.TypeEventsEmail, tasks.TypeEvent)
	})
	if got := subjects(smtpSrv, "reader@example.com"); len(got) != 2 {
		t.Fatalf("after leaving everything the reader got %v", got)
	}
}

// noTasks tells whether queue holds no task of the given types waiting,
// running, retrying or being bundled.
func noTasks(t *testing.T, insp *asynq.Inspector, queue string, types ...string) bool {
	t.Helper()
	groups, err := insp.Groups(queue)
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g.Size > 0 {
			return false
		}
	}
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListActiveTasks, insp.ListRetryTasks} {
		infos, err := list(queue)
		if err != nil {
			return false
		}
		for _, ti := range infos {
			if slices.Contains(types, ti.Type) {
				return false
			}
		}
	}
	return true
}

// threeStepFile writes a topics file with a three-step sequence of short
// delays.
func threeStepFile(t *testing.T, after ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "topics.yaml")
	body := fmt.Sprintf(`topics:
  - {id: digest, name: Weekly digest, default: true}
  - {id: updates, name: Product updates, default: true}
sequence:
  topic: digest
  steps:
    - {template: welcome, after: %s}
    - {template: getting-started, after: %s}
    - {template: best-of, after: %s}
`, after[0], after[1], after[2])
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// stepSubjects name the newsletter: with no settings saved, the display
// name of NEWSLETTER_FROM's default, "Newsletter".
var stepSubjects = []string{"Welcome to Newsletter", "Getting started with Newsletter", "A week with Newsletter"}

// A three-step sequence over real SMTP: each step in order, not before
// its delay; leaving between steps 1 and 2 stops 2 and 3. Step 2 comes
// 10 s after the welcome: the leaver's one-click follows the welcome's
// arrival, which on a busy machine (this package's tests run side by
// side) took more than the 2 s the gap once was.
func TestSequenceOverSMTP(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_TOPICS_FILE": threeStepFile(t, "1s", "10s", "12s"),
		"NEWSLETTER_SUBSCRIBE_RATE": "0",
	}), "serve")
	start := time.Now()
	svc.post(t, "/subscribe", `{"email":"stays@example.com"}`, "", http.StatusAccepted)
	svc.post(t, "/subscribe", `{"email":"leaves@example.com"}`, "", http.StatusAccepted)
	poll.True(t, poll.BusyMachine, "both welcomes", func() bool {
		return len(smtpSrv.To("stays@example.com")) == 1 && len(smtpSrv.To("leaves@example.com")) == 1
	})
	// Leave by the welcome's own one-click (it is the sequence topic's).
	welcome := smtpSrv.To("leaves@example.com")[0]
	resp, err := http.Post(strings.Trim(welcome.Header.Get("List-Unsubscribe"), "<>"), "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	poll.True(t, poll.BusyMachine, "the three steps", func() bool { return len(smtpSrv.To("stays@example.com")) == 3 })
	got := smtpSrv.To("stays@example.com")
	for i, m := range got {
		if m.Header.Get("Subject") != stepSubjects[i] {
			t.Fatalf("step %d is %q: %v", i+1, m.Header.Get("Subject"), subjects(smtpSrv, "stays@example.com"))
		}
		// Not before its delay from confirmation (asynq may run a
		// task up to a second early); never asserted from above.
		after := []time.Duration{time.Second, 10 * time.Second, 12 * time.Second}[i]
		if early := start.Add(after - time.Second); m.At.Before(early) {
			t.Fatalf("step %d at %s, before %s", i+1, m.At.Sub(start), after-time.Second)
		}
	}
	// The leaver's next step would have been due long since: give the
	// worker the time the stayer's last step took, then check.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.True(t, poll.BusyMachine, "the queue to drain", func() bool {
		return noTasks(t, insp, tasks.QueueDefault, tasks.TypeWelcomeEmail, tasks.TypeSequenceStep)
	})
	if got := subjects(smtpSrv, "leaves@example.com"); len(got) != 1 {
		t.Fatalf("after leaving between steps 1 and 2: %v", got)
	}
}

// TestLateWelcomeStillGoesFirst: no worker runs until after the second
// step's time (an outage longer than the gap between the first two
// steps, or asynq's 5 s poll against a 1 s welcome): the person still
// gets the welcome, then the second step.
func TestLateWelcomeStillGoesFirst(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := func() map[string]string {
		return realEnv(redisURL, smtpSrv.URL(), map[string]string{
			"NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_TOPICS_FILE": threeStepFile(t, "1s", "3s", "1h"),
			"NEWSLETTER_SUBSCRIBE_RATE": "0",
		})
	}
	api := startService(t, env(), "api")
	api.post(t, "/subscribe", `{"email":"late@example.com"}`, "", http.StatusAccepted)
	st := versionedStore(t, rdb)
	sub, err := st.Get(context.Background(), "late@example.com")
	if err != nil || sub.ConfirmedAt.IsZero() {
		t.Fatalf("subscriber %+v: %v", sub, err)
	}
	// Both steps' times pass with no worker to run them (a second's
	// margin: asynq may run a task up to a second early).
	poll.True(t, poll.BusyMachine, "the second step's time to pass", func() bool {
		return time.Since(sub.ConfirmedAt) > 4*time.Second
	})
	startService(t, env(), "worker")
	poll.True(t, poll.BusyMachine, "the second step", func() bool {
		return slices.Contains(subjects(smtpSrv, "late@example.com"), stepSubjects[1])
	})
	if got := subjects(smtpSrv, "late@example.com"); !slices.Equal(got, stepSubjects[:2]) {
		t.Fatalf("got %q, want the welcome then the second step", got)
	}
}

// A worker killed with SIGKILL in the middle of a sequence: another one
// carries on, and every person gets every step once, in order.
func TestSequenceSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	const people = 60
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_TOPICS_FILE": threeStepFile(t, "1s", "30s", "32s"),
		"NEWSLETTER_SUBSCRIBE_RATE": "0", "NEWSLETTER_SEND_RATE": "100000", "NEWSLETTER_CONCURRENCY": "4",
		"NEWSLETTER_RETRY_BASE": "100ms",
	})
	svc := startService(t, env, "api")
	var emails []string
	for i := range people {
		email := fmt.Sprintf("s%02d@example.com", i)
		emails = append(emails, email)
		svc.post(t, "/subscribe", `{"email":"`+email+`"}`, "", http.StatusAccepted)
	}
	env["NEWSLETTER_ADDR"] = freeAddr(t)
	first := startProcess(t, "worker", env)
	// Kill it once every welcome is out and recorded: the next steps wait
	// in Redis, scheduled by the killed process. They are due 30 s after
	// the signups, so on a busy machine none is in flight at the kill
	// (with 6 s, one was, and went out twice: a kill's known window).
	st := versionedStore(t, rdb)
	ctx := context.Background()
	poll.True(t, poll.BusyMachine, "every welcome sent and marked", func() bool {
		for _, e := range emails {
			sub, err := st.Get(ctx, e)
			if err != nil {
				return false
			}
			sent, err := st.SentMarks(ctx, []store.Mark{{Kind: "welcome", SubscriberID: sub.ID, Shared: true}})
			if err != nil || !sent[0] {
				return false
			}
		}
		return true
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	expireKilledLeases(t, rdb, first)
	env["NEWSLETTER_ADDR"] = freeAddr(t)
	startProcess(t, "worker", env)
	poll.Until(t, poll.BusyMachine+recoverAfter, func() error {
		for _, e := range emails {
			if got := subjects(smtpSrv, e); len(got) < 3 {
				return fmt.Errorf("still waiting for every step to everyone: %s got %q", e, got)
			}
		}
		return nil
	})
	insp := asynq.NewInspectorFromRedisClient(rdb)
	// A task the killed worker held comes back only when asynq's
	// recoverer finds its lease expired (about a minute): it must run,
	// and send nothing, before the count below is final.
	poll.True(t, poll.BusyMachine+recoverAfter, "the queue to drain", func() bool {
		return noTasks(t, insp, tasks.QueueDefault, tasks.TypeWelcomeEmail, tasks.TypeSequenceStep)
	})
	for _, e := range emails {
		if got := subjects(smtpSrv, e); !slices.Equal(got, stepSubjects) {
			t.Fatalf("%s got %q", e, got)
		}
	}
}

// A bad topics file stops start-up with one line per mistake; so does a
// step whose template exists nowhere.
func TestBadTopicsFileStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("topics:\n  - {id: Digest, name: D}\n  - {id: updates}\nsequence:\n  steps:\n    - {template: welcome, after: 3d}\n"), 0o644)
	missing := threeStepFile(t, "1s", "2s", "3s")
	os.WriteFile(missing, []byte(strings.Replace(mustRead(t, missing), "best-of", "not-written", 1)), 0o644)
	for file, want := range map[string][]string{
		bad: {
			`NEWSLETTER_TOPICS_FILE ` + bad + `: line 2: topics: no topic with id "digest"`,
			`NEWSLETTER_TOPICS_FILE ` + bad + `: line 2: topic id "Digest": use 1 to 32 lower-case letters`,
			`NEWSLETTER_TOPICS_FILE ` + bad + `: line 3: topic "updates": missing name`,
			`NEWSLETTER_TOPICS_FILE ` + bad + `: line 6: step "welcome": after "3d"`,
		},
		missing: {"template not-written.txt: not in NEWSLETTER_TEMPLATE_DIR"},
	} {
		var out, errb logtest.Buffer
		code := run(context.Background(), []string{"serve"}, func(k string) string {
			return map[string]string{"NEWSLETTER_TOPICS_FILE": file}[k]
		}, &out, &errb)
		if code != 1 {
			t.Fatalf("%s: exit %d\n%s", file, code, errb.String())
		}
		for _, w := range want {
			if !strings.Contains(errb.String(), w) {
				t.Fatalf("%s: stderr lacks %q:\n%s", file, w, errb.String())
			}
		}
	}
}

func mustRead(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
