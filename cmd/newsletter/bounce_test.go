package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"os"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const bounceAdminToken = "bounce-test-admin-token"

// deliverReport hands a report mail to the intake at addr, as the MTA that
// accepted our mail would, for the envelope recipient rcpt.
func deliverReport(t *testing.T, addr, rcpt, raw string) {
	t.Helper()
	raw = strings.ReplaceAll(raw, "\n", "\r\n")
	if err := smtp.SendMail(addr, nil, "", []string{rcpt}, []byte(raw)); err != nil {
		t.Fatalf("deliver the report to the intake: %v", err)
	}
}

// postfixDSN is a delivery-status report as Postfix writes it about our
// mail to rcpt whose envelope sender and Message-ID carried tag.
func postfixDSN(t *testing.T, rcpt, tag string) string {
	t.Helper()
	b, err := os.ReadFile("../../channels/email/feedback/testdata/postfix-dsn.eml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("TAG", tag, "RCPT", rcpt).Replace(string(b))
}

func dsnFor(recipient, returnPath, messageID string) string {
	return fmt.Sprintf(`From: Mail Delivery System <MAILER-DAEMON@mx.example.org>
To: %[2]s
Subject: Undelivered Mail Returned to Sender
Message-Id: <dsn-%[1]s@mx.example.org>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="b0"

--b0
Content-Type: text/plain

Your message could not be delivered.

--b0
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org

Final-Recipient: rfc822; %[1]s
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1 user unknown

--b0
Content-Type: text/rfc822-headers

Return-Path: <%[2]s>
To: %[1]s
Message-ID: %[3]s

--b0--
`, recipient, returnPath, messageID)
}

func arfFor(recipient, returnPath, messageID string) string {
	return fmt.Sprintf(`From: <fbl@isp.example>
To: <bounces@b.example.com>
Subject: Abuse report
Message-ID: <arf-%[1]s@isp.example>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="b1"

--b1
Content-Type: text/plain

This is an abuse report.

--b1
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: Test/1.0
Version: 1
Original-Mail-From: <%[2]s>
Original-Rcpt-To: <%[1]s>

--b1
Content-Type: text/rfc822-headers

To: %[1]s
Message-ID: %[3]s

--b1--
`, recipient, returnPath, messageID)
}

// TestLateBounceAndComplaintEndToEnd: the service sends a digest through an
// SMTP server that accepts everything with 250; then, like an MTA, a
// delivery-status report for one recipient and an abuse report for
// another arrive at the bounce intake's SMTP port. The first ends bounced,
// the second complained (a second identical report changes nothing), the
// run shows the rates, the progress of the issue the digest went out as
// counts both (its tags name it), and the next digest goes to the others
// only.
func TestLateBounceAndComplaintEndToEnd(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	intakeAddr := freeAddr(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_BOUNCE_ADDRESS":   "bounces@b.example.com",
		"NEWSLETTER_BOUNCE_SMTP_ADDR": intakeAddr,
		"NEWSLETTER_ADMIN_TOKEN":      bounceAdminToken,
		"NEWSLETTER_SMTP_HELO":        "news.example.com",
	}), "serve")
	st := versionedStore(t, rdb)
	ctx := context.Background()
	readers := []string{"gone@example.org", "spam@example.org", "stay@example.org"}
	for _, e := range readers {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, OnlyNew: true}); err != nil {
			t.Fatal(err)
		}
	}
	client := asynq.NewClientFromRedisClient(rdb)
	runDigest := func(period string) {
		t.Helper()
		if _, err := st.AddItem(ctx, store.Item{Title: "News " + period, URL: "https://example.com/" + period}); err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.EnqueueDigestPlan(ctx, client, period); err != nil {
			t.Fatal(err)
		}
	}
	runDigest("late-1")
	msgs := smtpSrv.WaitFor(t, 3, poll.BusyMachine)
	byRcpt := map[string]smtptest.Message{}
	for _, m := range msgs {
		byRcpt[m.To[0]] = m
		if m.Helo != "news.example.com" {
			t.Errorf("EHLO %q", m.Helo)
		}
		if !strings.HasPrefix(m.From, "bounces+") || !strings.HasSuffix(m.From, "@b.example.com") {
			t.Fatalf("envelope sender %q has no VERP tag", m.From)
		}
	}

	// A stranger's forged reports about a reader who stays: no tag, a tag
	// that does not verify, an abuse report naming the address. Each is
	// taken (250), counted unverified, and changes nothing.
	untagged := "<0a1b2c3d@news.example.com>"
	deliverReport(t, intakeAddr, "bounces@b.example.com", dsnFor("stay@example.org", "bounces@b.example.com", untagged))
	deliverReport(t, intakeAddr, "bounces+2n9c-d-000000000000@b.example.com", dsnFor("stay@example.org", "bounces+2n9c-d-000000000000@b.example.com", "<0a1b.2n9c-d-000000000000@news.example.com>"))
	deliverReport(t, intakeAddr, "bounces@b.example.com", arfFor("stay@example.org", "bounces@b.example.com", untagged))

	// A genuine DSN as Postfix writes it, to the tagged return path.
	gone := byRcpt["gone@example.org"]
	if tag := feedback.TagOfMessageID(gone.Header.Get("Message-Id")); tag == "" || tag != feedback.TagOfAddress(gone.From) {
		t.Fatalf("the digest's Message-ID %q and return path %q carry different tags", gone.Header.Get("Message-Id"), gone.From)
	}
	deliverReport(t, intakeAddr, gone.From, postfixDSN(t, "gone@example.org", feedback.TagOfAddress(gone.From)))
	spam := byRcpt["spam@example.org"]
	arf := arfFor("spam@example.org", spam.From, spam.Header.Get("Message-Id"))
	deliverReport(t, intakeAddr, "bounces@b.example.com", arf)
	deliverReport(t, intakeAddr, "bounces@b.example.com", arf) // the same report again
	poll.Until(t, poll.BusyMachine, func() error {
		for email, want := range map[string]store.Status{"gone@example.org": store.Bounced, "spam@example.org": store.Complained} {
			if sub, err := st.Get(ctx, email); err != nil || sub.Status != want {
				return fmt.Errorf("%s: %s %v, want %s", email, sub.Status, err, want)
			}
		}
		return nil
	})
	// Mail to another address than the bounce address is refused.
	if err := smtp.SendMail(intakeAddr, nil, "", []string{"ceo@b.example.com"}, []byte("Subject: hi\r\n\r\nhi\r\n")); err == nil {
		t.Error("the intake accepted mail for another recipient")
	}

	admin := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, svc.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+bounceAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		code, body := admin("GET", "/api/digests/late-1")
		if code != 200 || !strings.Contains(body, `"bounces":1`) || !strings.Contains(body, `"complaints":1`) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	// The digest went out as an issue, and its tags name it: the
	// reports count against that issue's progress too.
	run, err := st.DigestRun(ctx, "late-1")
	if err != nil || run.Issue == 0 {
		t.Fatalf("the digest's issue: %+v %v", run, err)
	}
	if tr, ok := feedback.NewTagger([]byte("integration-test-secret")).Trace(feedback.TagOfAddress(gone.From)); !ok || tr.Issue != run.Issue {
		t.Fatalf("the digest mail's tag names issue %d (%v), not %d", tr.Issue, ok, run.Issue)
	}
	if code, body := admin("GET", fmt.Sprintf("/api/issues/%d/progress", run.Issue)); code != 200 ||
		!strings.Contains(body, `"status":"sent"`) || !strings.Contains(body, `"bounces":1`) || !strings.Contains(body, `"complaints":1`) {
		t.Fatalf("the issue's progress after a bounce and a complaint: %d %s", code, body)
	}
	if sub, err := st.Get(ctx, "stay@example.org"); err != nil || sub.Status != store.Active || len(sub.Topics) == 0 {
		t.Fatalf("forged reports changed the reader who stays: %+v %v", sub, err)
	}
	_, metrics := admin("GET", "/metrics")
	for _, want := range []string{`newsletter_complaints_total{source="smtp"} 1`, `newsletter_bounces_total{source="smtp",type="hard"} 1`,
		`newsletter_bounce_reports_total{result="unverified"} 3`, `newsletter_bounce_reports_total{result="queued"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, body := admin("GET", "/api/suppressions?reason=complained"); code != 200 || !strings.Contains(body, "spam@example.org") || strings.Contains(body, "gone@") {
		t.Errorf("suppressions: %d %s", code, body)
	}

	runDigest("late-2")
	poll.True(t, poll.BusyMachine, "the second digest to reach the reader who stayed", func() bool {
		return len(smtpSrv.To("stay@example.org")) == 2
	})
	poll.Until(t, poll.BusyMachine, func() error {
		run, err := st.DigestRun(ctx, "late-2")
		if err != nil || run.State != store.RunPlanned || run.Sent != 1 {
			return fmt.Errorf("run %+v %v", run, err)
		}
		return nil
	})
	for _, e := range []string{"gone@example.org", "spam@example.org"} {
		if n := len(smtpSrv.To(e)); n != 1 {
			t.Errorf("%s got %d digests after the report, want only the first", e, n)
		}
	}
}
