package mailer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
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
