package mailer

import (
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/mailheader"
)

// receivedTo is the To header of a message as received: its field
// unfolded as RFC 5322 says (the CRLF before the whitespace removed,
// nothing else; net/textproto also collapses the whitespace around a
// fold, which would change a name with two spaces in a row), parsed by
// net/mail.
func receivedTo(t testing.TB, data []byte) *mail.Address {
	t.Helper()
	head, _, _ := bytes.Cut(data, []byte("\r\n\r\n"))
	head = append(head, "\r\n"...)
	for len(head) > 0 {
		field := head[:mailheader.FieldLen(head)]
		head = head[len(field):]
		name, value, _ := strings.Cut(string(field), ":")
		if !strings.EqualFold(name, "To") {
			continue
		}
		value = strings.TrimSuffix(value, "\r\n")
		value = strings.ReplaceAll(strings.ReplaceAll(value, "\r\n ", " "), "\r\n\t", "\t")
		a, err := mail.ParseAddress(strings.TrimLeft(value, " \t"))
		if err != nil {
			t.Fatalf("the received To %q does not parse: %v", value, err)
		}
		return a
	}
	t.Fatalf("no To header in\n%s", head)
	return nil
}

// nameSender sends mails named by a name through the real SMTP path, each
// kind of mail by the way it is built: a mail rendered whole (confirm,
// welcome, events, a test send: go-mail writes it) and a prepared one
// (digest, issue: its encoded template, or go-mail for names of another
// shape).
type nameSender struct {
	srv      *smtptest.Server
	smtp     *SMTP
	prepared *Prepared
	n        atomic.Int64
}

func newNameSender(t testing.TB, r *Renderer) *nameSender {
	srv := smtptest.Start(t)
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	p, err := r.Prepare(KindDigest, Data{Period: "2026-W49", Entries: preparedItems})
	if err != nil {
		t.Fatal(err)
	}
	return &nameSender{srv: srv, smtp: m, prepared: p}
}

// check sends a whole and a prepared mail to a person called name and
// fails t unless both arrive with name in their To.
func (s *nameSender) check(t *testing.T, name string) {
	t.Helper()
	whole := testMessage(fmt.Sprintf("w%d@example.org", s.n.Add(1)))
	whole.ToName = name
	prepared, err := s.prepared.RenderFor(s.smtp, Data{Email: fmt.Sprintf("p%d@example.org", s.n.Add(1)), Name: name,
		UnsubscribeURL: "https://news.example.com/u?token=t", PreferencesURL: "https://news.example.com/p?token=t"})
	if err != nil {
		t.Fatal(err)
	}
	prepared.ToName = name // as the worker sets it (DeliverOne)
	for _, msg := range []*Message{whole, prepared} {
		if err := s.smtp.Send(context.Background(), msg); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		got := s.srv.To(msg.To)
		if len(got) != 1 {
			t.Fatalf("%q: %d mails to %s", name, len(got), msg.To)
		}
		if a := receivedTo(t, got[0].Data); a.Name != name || a.Address != msg.To {
			t.Fatalf("sent to %q <%s>, received To %q <%s>", name, msg.To, a.Name, a.Address)
		}
	}
}

// TestNamesWithQuotesArrive: a name with quotes and a comma, and one with
// an unpaired quote, reach the To header as typed. go-mail's AddToFormat
// pasted them between quotes: the first arrived as "Bob  The Builder ,
// Jr.", the second made every mail to Kate fail as invalid.
func TestNamesWithQuotesArrive(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	s := newNameSender(t, r)
	for _, name := range []string{`Bob "The Builder", Jr.`, `Kate "K`, `back\slash`, `Zoë "Z" Quinn`, `Ann  Lee`} {
		s.check(t, name)
	}
}

// FuzzDisplayName: any name the signup accepts (address.CheckName)
// arrives in the To header as it was given.
func FuzzDisplayName(f *testing.F) {
	for _, name := range []string{"", "Ann Lee", `Bob "The Builder", Jr.`, `Kate "K`, `a\"b\\`, "=?utf-8?q?Ann?=",
		"Zoë", "李小龙", "O'Brien (home) <x@y>", strings.Repeat("Ann Lee ", 12), strings.Repeat("é\" ", 30), "a  b  c"} {
		f.Add(name)
	}
	r, err := NewRenderer("")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, err := address.CheckName(raw)
		if err != nil {
			return
		}
		// A server and a mailer per input: one for the whole run would
		// keep every mail of it in memory.
		newNameSender(t, r).check(t, name)
	})
}
