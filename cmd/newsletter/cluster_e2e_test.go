package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/smtptest"
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
