package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/smtptest"
	"github.com/newsletter/newsletter/store"
)

// clusterEnv is realEnv for a service on cluster c: every role connects
// through NEWSLETTER_REDIS_CLUSTER_ADDRS, and no NEWSLETTER_REDIS_URL is
// set, so nothing can reach a single Redis by mistake.
func clusterEnv(c *rediscluster.Cluster, smtpURL string, extra map[string]string) map[string]string {
	env := realEnv("", smtpURL, extra)
	delete(env, "NEWSLETTER_REDIS_URL")
	env["NEWSLETTER_REDIS_CLUSTER_ADDRS"] = strings.Join(c.Addrs(), ",")
	return env
}

// TestClusterSignupFlowOverSMTP is TestSignupFlowOverSMTP's journey on a
// Redis Cluster: subscribe over HTTP, the confirmation over SMTP, its
// link, the welcome after the delay.
func TestClusterSignupFlowOverSMTP(t *testing.T) {
	cluster := rediscluster.Start(t)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, clusterEnv(cluster, smtpSrv.URL(), map[string]string{
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
	if confirm.To[0] != "flow@example.com" {
		t.Fatalf("confirmation to %v", confirm.To)
	}
	link := ""
	for _, l := range linkPattern.FindAllString(confirm.Text(), -1) {
		if strings.Contains(l, "/confirm?token=") {
			link = strings.TrimRight(l, ".\"'>")
			break
		}
	}
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(link, svc.base+"/confirm?token=") {
		t.Fatalf("no confirm link (%v) in:\n%s", err, confirm.Text())
	}
	resp, err = http.PostForm(svc.base+"/confirm", url.Values{"token": {u.Query().Get("token")}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %v %v", resp, err)
	}
	resp.Body.Close()
	confirmedAt := time.Now()

	welcome := smtpSrv.WaitFor(t, 2, poll.BusyMachine)[1]
	// asynq keeps scheduled tasks with a whole-second score, so a task
	// may run up to a second before its due time.
	if time.Since(confirmedAt) < time.Second {
		t.Fatal("welcome arrived before the welcome delay")
	}
	if !strings.Contains(welcome.Header.Get("Subject"), "Welcome") || welcome.To[0] != "flow@example.com" {
		t.Fatalf("second mail is %q to %v", welcome.Header.Get("Subject"), welcome.To)
	}
	unsub := strings.Trim(welcome.Header.Get("List-Unsubscribe"), "<>")
	if !strings.HasPrefix(unsub, svc.base+"/unsubscribe?token=") {
		t.Fatalf("List-Unsubscribe %q", welcome.Header.Get("List-Unsubscribe"))
	}
	resp, err = http.Post(unsub, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", svc.base+"/api/subscribers/flow@example.com", nil)
	req.Header.Set("Authorization", "Bearer admintoken-0123456789")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), `"status":"active"`) || !strings.Contains(string(body), `"topics":["updates"]`) {
		t.Fatalf("after one-click: %s %v", body, err)
	}
	if n := len(smtpSrv.Messages()); n != 2 {
		t.Fatalf("%d mails, want exactly confirm + welcome", n)
	}
	if code := svc.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, svc.stderr)
	}
}

// clusterStore is the store on cluster c, its data version stamped (or
// checked) as a service's start-up does, for seeding readers directly.
func clusterStore(t *testing.T, c *rediscluster.Cluster) *store.Redis {
	t.Helper()
	st := store.NewRedis(c.Client(t))
	if err := st.CheckVersion(context.Background(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return st
}

// clusterIssueReaders is how many readers the cluster's big issue goes
// to: enough that every one of the 64 shards, on all three primaries,
// holds a few hundred, and the send takes many batches.
const clusterIssueReaders = 20000

// TestClusterIssueToManyReaders: an issue through the API to 20,000
// readers spread over the cluster's shards; each gets it exactly once,
// and the progress route counts them all.
func TestClusterIssueToManyReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 20,000 mails")
	}
	cluster := rediscluster.Start(t)
	smtpSrv := smtptest.Start(t)
	emails := seedReaders(t, clusterStore(t, cluster), "c", clusterIssueReaders, "updates")
	svc := startService(t, clusterEnv(cluster, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_SEND_RATE": "100000", "NEWSLETTER_DIGEST_BATCH": "200",
	}), "serve")
	began := time.Now()
	id := svc.createIssue(t, "To the whole cluster", "", issueMarkdown, "updates")
	svc.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`, http.StatusAccepted, nil)
	p := svc.waitSent(t, id, smtpSrv)
	t.Logf("%d readers sent to in %s", clusterIssueReaders, time.Since(began).Round(time.Millisecond))
	assertEachOnce(t, smtpSrv, emails, 0)
	if p.Planned != len(emails) || p.Sent != len(emails) || p.Skipped != 0 || p.Failed != 0 {
		t.Fatalf("progress %+v, want all %d planned and sent", p, len(emails))
	}
}

// assertEachOnce checks that every address got the mail, and at most
// maxDups of them twice (never more), and that nothing went anywhere
// else; it returns the number of doubles.
func assertEachOnce(t *testing.T, srv *smtptest.Server, emails []string, maxDups int) int {
	t.Helper()
	got := mailsTo(srv)
	dups, missing := 0, 0
	for _, e := range emails {
		switch n := got[e]; {
		case n == 0:
			missing++
			if missing <= 5 {
				t.Errorf("%s got no mail", e)
			}
		case n > 2:
			t.Errorf("%s got %d mails", e, n)
		default:
			dups += n - 1
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d readers got no mail", missing, len(emails))
	}
	if dups > maxDups {
		t.Errorf("%d readers got it twice, more than %d", dups, maxDups)
	}
	if n := len(srv.Messages()); n != len(emails)+dups {
		t.Errorf("%d mails for %d readers and %d doubles: mail to someone else", n, len(emails), dups)
	}
	return dups
}
