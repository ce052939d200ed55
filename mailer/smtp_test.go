package mailer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

func newTestSMTP(t *testing.T, srv *smtptest.Server, pool int) *SMTP {
	t.Helper()
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", PoolSize: pool, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func testMessage(to string) *Message {
	return &Message{Kind: KindWelcome, To: to, Subject: "Hi", Text: "text part", HTML: "<p>html part</p>",
		UnsubscribeURL: "https://news.example.com/unsubscribe?token=abc"}
}

func TestSMTPSendsHeadersAndParts(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 2)
	msg := testMessage("ann@example.org")
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	h := got.Header
	if h.Get("List-Unsubscribe") != "<https://news.example.com/unsubscribe?token=abc>" ||
		h.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("list headers: %q / %q", h.Get("List-Unsubscribe"), h.Get("List-Unsubscribe-Post"))
	}
	if h.Get("Message-Id") != "<"+msg.MessageID+">" || !strings.HasSuffix(msg.MessageID, "@example.com") {
		t.Fatalf("Message-ID %q, message %q", h.Get("Message-Id"), msg.MessageID)
	}
	if _, err := h.Date(); err != nil {
		t.Fatalf("Date: %v", err)
	}
	body := string(got.Data)
	if !strings.Contains(body, "multipart/alternative") || !strings.Contains(body, "text part") || !strings.Contains(body, "html part") {
		t.Fatalf("want text and HTML parts:\n%s", body)
	}
	if got.From != "news@example.com" || got.To[0] != "ann@example.org" {
		t.Fatalf("envelope %s -> %v", got.From, got.To)
	}
}

func TestSMTPTransactionalHasNoListHeaders(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	msg := testMessage("a@example.org")
	msg.Kind, msg.UnsubscribeURL = KindConfirm, ""
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if h := srv.WaitFor(t, 1, 5*time.Second)[0].Header; h.Get("List-Unsubscribe") != "" {
		t.Fatalf("a confirmation carries List-Unsubscribe: %q", h.Get("List-Unsubscribe"))
	}
}

func TestSMTPReusesConnections(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 3)
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := m.Send(context.Background(), testMessage(fmt.Sprintf("u%d@example.org", i))); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	srv.WaitFor(t, 60, 5*time.Second)
	if n := srv.Sessions(); n < 1 || n > 3 {
		t.Fatalf("60 mails over %d connections; want at most the pool size 3", n)
	}
}

func TestSMTPErrorClasses(t *testing.T) {
	srv := smtptest.Start(t)
	srv.SetScript(func(rcpt string, attempt int) *smtptest.Fault {
		switch strings.Split(rcpt, "@")[0] {
		case "gone":
			return &smtptest.Fault{Err: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}}
		case "grey":
			return &smtptest.Fault{Err: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}}
		case "policy":
			return &smtptest.Fault{AtData: true, Err: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "spam"}}
		case "drop":
			if attempt == 1 {
				return &smtptest.Fault{Drop: true}
			}
		}
		return nil
	})
	m := newTestSMTP(t, srv, 1)
	ctx := context.Background()
	for rcpt, want := range map[string]Class{"gone@x.org": Bounced, "grey@x.org": Throttled, "policy@x.org": Rejected, "drop@x.org": Temporary} {
		err := m.Send(ctx, testMessage(rcpt))
		se := AsSendError(err)
		if se == nil || se.Class != want || se.Domain != "x.org" {
			t.Errorf("%s: %v, want class %s", rcpt, err, want)
		}
		// Whatever broke, the next mail goes through (on a clean or new
		// connection).
		if err := m.Send(ctx, testMessage("ok-after-"+rcpt)); err != nil {
			t.Errorf("send after %s: %v", rcpt, err)
		}
	}
	if se := AsSendError(m.Send(ctx, testMessage("gone@x.org"))); se.Code != 550 || se.Enhanced != "5.1.1" {
		t.Fatalf("codes not carried: %+v", se)
	}
	// The dropped mail was not accepted; its retry is.
	if err := m.Send(ctx, testMessage("drop@x.org")); err != nil || len(srv.To("drop@x.org")) != 1 {
		t.Fatalf("retry after drop: %v, %d accepted", err, len(srv.To("drop@x.org")))
	}
}

func TestSMTPServerDown(t *testing.T) {
	m, err := NewSMTP(SMTPOptions{Server: Server{Host: "127.0.0.1", Port: 1, TLS: "none"}, From: "a@b.co", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	se := AsSendError(m.Send(context.Background(), testMessage("a@b.co")))
	if se == nil || !se.Temporary() {
		t.Fatalf("unreachable server must be temporary: %v", se)
	}
}

func TestSMTPClosesIdleConnections(t *testing.T) {
	srv := smtptest.Start(t)
	cfg, _ := ParseServerURL(srv.URL())
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "a@b.co", PoolSize: 2, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Send(context.Background(), testMessage("x@example.org")); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 5*time.Second, "the idle connection to close", func() bool { return len(m.idle) == 0 && len(m.slots) == 0 })
	// The next mail opens a new connection.
	if err := m.Send(context.Background(), testMessage("y@example.org")); err != nil || srv.Sessions() != 2 {
		t.Fatalf("after the idle close: %v, %d connections", err, srv.Sessions())
	}
}

// TestSMTPEnvelopeAndIdentity: the EHLO name is the configured one; the
// envelope sender carries the mail's VERP tag, as does its Message-ID; the
// To header names the subscriber; Feedback-ID names the stream.
func TestSMTPEnvelopeAndIdentity(t *testing.T) {
	srv := smtptest.Start(t)
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", Helo: "news.example.com", BounceAddress: "bounces@b.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	msg := testMessage("ann@example.org")
	msg.Kind, msg.ToName, msg.Tag = KindDigest, "Ann Lee", "2n9c-d-0123456789ab"
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	if got.Helo != "news.example.com" {
		t.Errorf("EHLO %q, want the configured name", got.Helo)
	}
	if got.From != "bounces+2n9c-d-0123456789ab@b.example.com" {
		t.Errorf("envelope sender %q", got.From)
	}
	if id := got.Header.Get("Message-Id"); !strings.Contains(id, ".2n9c-d-0123456789ab@example.com>") {
		t.Errorf("Message-ID %q carries no tag", id)
	}
	if to := got.Header.Get("To"); to != `"Ann Lee" <ann@example.org>` {
		t.Errorf("To %q", to)
	}
	if fb := got.Header.Get("Feedback-Id"); fb != "digest:newsletter:example.com" {
		t.Errorf("Feedback-ID %q", fb)
	}
	if from := got.Header.Get("From"); !strings.Contains(from, "news@example.com") {
		t.Errorf("From %q: the header keeps the From address", from)
	}
}
