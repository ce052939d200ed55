package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/mmcdole/gofeed"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const digestIssueAdmin = "digest-issue-admin-token-0123"

// get answers a GET of path on the service (with the admin token when
// admin), its status and body.
func (s *service) get(t *testing.T, path string, admin bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+digestIssueAdmin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestDigestAsIssueEndToEnd: the whole service over real Redis and SMTP.
// Items added and the week's digest run (the API's route and the
// command): the run makes the issue digest-<period>, each reader of the
// digest topic gets it once and nobody else, its progress reaches sent
// on the issue's route as on the digest's, it is in the archive, its page
// and the Atom feed, and the digest's metrics count it. Running the week
// again sends nothing; an empty week makes no issue and sends nothing.
func TestDigestAsIssueEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{"NEWSLETTER_ADMIN_TOKEN": digestIssueAdmin, "NEWSLETTER_WELCOME_DELAY": "1h"})
	svc := startService(t, env, "serve")
	st := versionedStore(t, rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	ctx := context.Background()
	readers := []string{"ann@example.org", "bob@example.org", "cid@example.org"}
	for _, e := range readers {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, OnlyNew: true, Topics: []string{"digest"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "upd@example.org", Activate: true, OnlyNew: true, Topics: []string{"updates"}}); err != nil {
		t.Fatal(err)
	}
	idle := func() {
		t.Helper()
		poll.Until(t, poll.BusyMachine, func() error {
			q, err := insp.GetQueueInfo(tasks.QueueCritical)
			if err != nil {
				return err
			}
			if n := q.Pending + q.Active + q.Scheduled + q.Retry; n > 0 {
				return fmt.Errorf("critical queue: %+v", q)
			}
			return nil
		})
	}

	svc.post(t, "/api/items", `{"title":"Release 2.0","url":"https://example.com/2.0","summary":"It is out."}`, digestIssueAdmin, http.StatusCreated)
	svc.post(t, "/api/digest/run", `{"period":"2026-W49"}`, digestIssueAdmin, http.StatusAccepted)
	var run store.DigestRun
	poll.Until(t, poll.BusyMachine, func() error {
		code, body := svc.get(t, "/api/digests/2026-W49", true)
		if err := json.Unmarshal([]byte(body), &run); code != 200 || err != nil || run.State != store.RunPlanned || run.Sent != 3 || run.Issue == 0 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	var prog store.IssueProgress
	poll.Until(t, poll.BusyMachine, func() error {
		code, body := svc.get(t, fmt.Sprintf("/api/issues/%d/progress", run.Issue), true)
		if err := json.Unmarshal([]byte(body), &prog); code != 200 || err != nil || prog.Status != store.IssueSent {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if prog.Planned != 3 || prog.Sent != 3 || prog.Skipped != 0 || prog.Failed != 0 {
		t.Fatalf("progress %+v", prog)
	}
	code, body := svc.get(t, fmt.Sprintf("/api/issues/%d", run.Issue), true)
	var is store.Issue
	if err := json.Unmarshal([]byte(body), &is); code != 200 || err != nil || is.Slug != "digest-2026-w49" || is.Period != "2026-W49" || is.Subject != "What is new (2026-W49)" {
		t.Fatalf("the digest's issue: %d %s", code, body)
	}
	for _, e := range readers {
		if got := subjects(smtpSrv, e); len(got) != 1 || got[0] != "What is new (2026-W49)" {
			t.Fatalf("%s got %q", e, got)
		}
	}
	if n := len(smtpSrv.To("upd@example.org")); n != 0 {
		t.Fatalf("a reader of updates only got %d digests", n)
	}
	mail := smtpSrv.To(readers[0])[0]
	if !strings.Contains(mail.Text(), "View in the browser: "+svc.base+"/archive/digest-2026-w49") || !strings.Contains(mail.Text(), "Release 2.0") {
		t.Fatalf("digest mail:\n%s", mail.Data)
	}

	// The archive, the page and the feed (the archive's cache learns of
	// a newly sent issue within seconds).
	poll.Until(t, poll.BusyMachine, func() error {
		if code, body := svc.get(t, "/archive", false); code != 200 || !strings.Contains(body, `/archive/digest-2026-w49"`) {
			return fmt.Errorf("archive: %d %s", code, body)
		}
		return nil
	})
	if code, body := svc.get(t, "/archive/digest-2026-w49", false); code != 200 || !strings.Contains(body, `<a href="https://example.com/2.0">Release 2.0</a>`) || strings.Contains(body, "token=") {
		t.Fatalf("archive page: %d %s", code, body)
	}
	code, body = svc.get(t, "/archive/feed.atom", false)
	feed, err := gofeed.NewParser().ParseString(body)
	if code != 200 || err != nil || feed.FeedType != "atom" || len(feed.Items) != 1 ||
		feed.Items[0].Title != "What is new (2026-W49)" || feed.Items[0].Link != svc.base+"/archive/digest-2026-w49" {
		t.Fatalf("feed: %d %v %s", code, err, body)
	}
	// The digest's metrics and alerts read as before.
	_, metrics := svc.get(t, "/metrics", true)
	for _, want := range []string{`newsletter_emails_sent_total{kind="digest"} 3`, `newsletter_digest_run_recipients{outcome="sent",period="2026-W49"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The week again, by the API and by the command: nothing more.
	idle()
	svc.post(t, "/api/digest/run", `{"period":"2026-W49"}`, digestIssueAdmin, http.StatusAccepted)
	var out, errOut strings.Builder
	if code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W49"); code != 0 {
		t.Fatalf("digest run: %d %s", code, errOut.String())
	}
	idle()
	if n := len(smtpSrv.Messages()); n != 3 {
		t.Fatalf("running the week again sent %d more", n-3)
	}

	// An empty week: recorded empty, no issue, no mail.
	svc.post(t, "/api/digest/run", `{"period":"2026-W50"}`, digestIssueAdmin, http.StatusAccepted)
	poll.Until(t, poll.BusyMachine, func() error {
		code, body := svc.get(t, "/api/digests/2026-W50", true)
		if code != 200 || !strings.Contains(body, `"state":"empty"`) || strings.Contains(body, `"issue"`) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	idle()
	if code, body := svc.get(t, "/api/issues", true); code != 200 || strings.Count(body, `"slug"`) != 1 {
		t.Fatalf("issues after an empty week: %d %s", code, body)
	}
	if n := len(smtpSrv.Messages()); n != 3 {
		t.Fatalf("an empty week sent %d mails", n-3)
	}
}

// run2 runs the binary's command line in the test's process.
func run2(ctx context.Context, env map[string]string, stdout, stderr io.Writer, args ...string) int {
	return run(ctx, args, func(k string) string { return env[k] }, stdout, stderr)
}
