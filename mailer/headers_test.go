package mailer

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// A mail names no software: a library's banner (X-Mailer, User-Agent)
// tells a spam filter and an attacker what sent it, and a reader nothing.
func TestMailCarriesNoLibraryBanner(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	if err := m.Send(context.Background(), testMessage("ann@example.org")); err != nil {
		t.Fatal(err)
	}
	keys := newTestKeys(t)
	signer, err := email.NewDKIM("example.com", keys.rsa, keys.ed)
	if err != nil {
		t.Fatal(err)
	}
	mails := []smtptest.Message{srv.WaitFor(t, 1, 5*time.Second)[0], signedDigest(t, signer)}
	for i, got := range mails {
		for _, h := range []string{"X-Mailer", "User-Agent"} {
			if v := got.Header.Get(h); v != "" {
				t.Errorf("mail %d carries %s: %s", i, h, v)
			}
		}
		header := got.Data[:bytes.Index(got.Data, []byte("\r\n\r\n"))]
		if strings.Contains(strings.ToLower(string(header)), "go-mail") {
			t.Errorf("mail %d names its library:\n%s", i, header)
		}
	}
}

// TestAutoSubmitted: a confirmation and an unsubscribe link are marked
// auto-generated (RFC 3834), so that an auto-responder leaves them
// unanswered; a newsletter mail is not marked.
func TestAutoSubmitted(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	want := map[string]string{KindConfirm: "auto-generated", KindUnsubscribe: "auto-generated", KindWelcome: "", KindDigest: ""}
	for kind := range want {
		msg := testMessage(kind + "@example.org")
		msg.Kind = kind
		if err := m.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	for kind, v := range want {
		got := srv.To(kind + "@example.org")
		if len(got) != 1 {
			t.Fatalf("%s: %d mails", kind, len(got))
		}
		if h := got[0].Header["Auto-Submitted"]; strings.Join(h, ",") != v {
			t.Errorf("%s: Auto-Submitted %q, want %q", kind, h, v)
		}
	}
}

// TestBulkAndTransactionalHeaders: list mail (an issue, the digest, an
// event bundle) says "Precedence: bulk"; a transactional mail (a
// confirmation, an unsubscribe link, an invite) does not, and carries no
// List-* header even when it holds an unsubscribe link: its link is its
// content, not a list's way out.
func TestBulkAndTransactionalHeaders(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	kinds := []string{KindIssue, KindDigest, KindEvents, KindWelcome, KindConfirm, KindUnsubscribe, KindInvite}
	for _, kind := range kinds {
		msg := testMessage(kind + "@example.org")
		msg.Kind = kind
		msg.UnsubscribeURL = "https://news.example.com/unsubscribe?token=abc"
		if err := m.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range kinds {
		got := srv.To(kind + "@example.org")
		if len(got) != 1 {
			t.Fatalf("%s: %d mails", kind, len(got))
		}
		h := got[0].Header
		wantBulk := kind == KindIssue || kind == KindDigest || kind == KindEvents
		if (h.Get("Precedence") == "bulk") != wantBulk || (!wantBulk && h.Get("Precedence") != "") {
			t.Errorf("%s: Precedence %q", kind, h.Get("Precedence"))
		}
		transactional := autoSubmitted[kind]
		for _, name := range []string{"List-Unsubscribe", "List-Unsubscribe-Post"} {
			if (h.Get(name) != "") == transactional {
				t.Errorf("%s: %s %q", kind, name, h.Get(name))
			}
		}
	}
}
