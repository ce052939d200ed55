package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

const signupAdminToken = "signup-e2e-admin-0123456789"

// confirmToken is the token of the confirmation link in msg.
func confirmToken(t *testing.T, base string, msg smtptest.Message) string {
	t.Helper()
	for _, l := range linkPattern.FindAllString(msg.Text(), -1) {
		if l = strings.TrimRight(l, ".\"'>"); strings.HasPrefix(l, base+"/confirm?token=") {
			u, err := url.Parse(l)
			if err != nil {
				t.Fatal(err)
			}
			return u.Query().Get("token")
		}
	}
	t.Fatalf("no confirm link in:\n%s", msg.Text())
	return ""
}

// bareTo checks that msg's To: header is rcpt alone, no display name.
func bareTo(t *testing.T, msg smtptest.Message, rcpt string) {
	t.Helper()
	to, err := mail.ParseAddress(msg.Header.Get("To"))
	if err != nil || to.Name != "" || to.Address != rcpt {
		t.Fatalf("To: %q (%v), want the bare address %s", msg.Header.Get("To"), err, rcpt)
	}
}

// TestSignupAbuseOverSMTP is what a stranger can do with the public forms,
// against a real Redis and a real SMTP server, with the defaults (double
// opt-in, a 10-minute cooldown) and no per-client limit: a name typed into
// the form never reaches the victim (the confirmation's To: is the bare
// address); ten +tag spellings of one mailbox make one confirmation; five
// unsubscribe-by-mail requests make one link; a complained address stays
// suppressed until its owner follows the one confirmation it gets.
func TestSignupAbuseOverSMTP(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN":          signupAdminToken,
		"NEWSLETTER_FROM":                 "News <news@example.com>",
		"NEWSLETTER_SUBSCRIBE_RATE":       "0",
		"NEWSLETTER_UNSUBSCRIBE_BY_EMAIL": "confirm",
	}), "serve")
	st := versionedStore(t, rdb)
	ctx := context.Background()
	post := func(path string, body map[string]string) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(svc.base+path, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s %v: %d", path, body, resp.StatusCode)
		}
	}
	waitTo := func(rcpt string, n int) []smtptest.Message {
		t.Helper()
		poll.True(t, poll.BusyMachine, "mail to "+rcpt, func() bool { return len(smtpSrv.To(rcpt)) >= n })
		return smtpSrv.To(rcpt)
	}

	// 1. The name a stranger typed is not in the victim's mail.
	spam := "FREE iPhone! Claim at https://evil.example.com/win"
	post("/subscribe", map[string]string{"email": "victim@example.com", "name": spam})
	first := waitTo("victim@example.com", 1)[0]
	bareTo(t, first, "victim@example.com")
	if strings.Contains(string(first.Data), "iPhone") {
		t.Fatalf("the requester's text is in the confirmation:\n%s", first.Data)
	}

	// 2. +tags of the mailbox: held, and nothing stored. A witness's
	// confirmation, asked for afterwards, shows the queue has moved on.
	for i := 1; i <= 10; i++ {
		post("/subscribe", map[string]string{"email": "victim+" + string(rune('a'+i)) + "@example.com"})
	}
	post("/subscribe", map[string]string{"email": "witness@example.com"})
	waitTo("witness@example.com", 1)
	var inVictimsInbox int
	for _, m := range smtpSrv.Messages() {
		if strings.HasPrefix(m.To[0], "victim") {
			inVictimsInbox++
		}
	}
	if inVictimsInbox != 1 {
		t.Fatalf("%d confirmations reached the victim's mailbox, want 1", inVictimsInbox)
	}

	// 3. Unsubscribe by mail: five requests, one link.
	for _, e := range []string{"member@example.com", "other@example.com"} {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: e, Name: spam, Activate: true, OnlyNew: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		post("/unsubscribe", map[string]string{"email": "member@example.com"})
	}
	post("/unsubscribe", map[string]string{"email": "other@example.com"})
	waitTo("other@example.com", 1)
	links := waitTo("member@example.com", 1)
	if len(links) != 1 {
		t.Fatalf("%d unsubscribe links to one address, want 1", len(links))
	}
	bareTo(t, links[0], "member@example.com")

	// 4. A complained address: a signup leaves it complained and on the
	// list, and mails it one confirmation; following it lifts the
	// suppression.
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "spam@example.com", Activate: true, OnlyNew: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordFeedback(ctx, store.Feedback{Email: "spam@example.com", Type: store.Complaint}, store.FeedbackPolicy{}); err != nil {
		t.Fatal(err)
	}
	post("/subscribe", map[string]string{"email": "spam@example.com", "name": "Stranger"})
	reconfirm := waitTo("spam@example.com", 1)[0]
	bareTo(t, reconfirm, "spam@example.com")
	admin := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", svc.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+signupAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := admin("/api/subscribers/spam@example.com"); !strings.Contains(body, `"status":"complained"`) {
		t.Fatalf("after a stranger's signup: %s", body)
	}
	if body := admin("/api/suppressions"); !strings.Contains(body, `"spam@example.com"`) {
		t.Fatalf("a stranger's signup took the address off the suppressions: %s", body)
	}
	resp, err := http.PostForm(svc.base+"/confirm", url.Values{"token": {confirmToken(t, svc.base, reconfirm)}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %v %v", resp, err)
	}
	resp.Body.Close()
	if body := admin("/api/subscribers/spam@example.com"); !strings.Contains(body, `"status":"active"`) {
		t.Fatalf("after the owner confirmed: %s", body)
	}
	if body := admin("/api/suppressions"); strings.Contains(body, `"spam@example.com"`) {
		t.Fatalf("still suppressed after the owner confirmed: %s", body)
	}
}
