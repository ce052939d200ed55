package mailer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// TestReplyToOverSMTP: an issue's Reply-To reaches the SMTP server as the
// Reply-To header, on a mail sent whole and on the mails of a prepared
// batch written from its encoded template; a mail without one carries
// none (a reply goes to From).
func TestReplyToOverSMTP(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	ctx := context.Background()

	whole := testMessage("whole@example.org")
	whole.ReplyTo = "editor@example.com"
	if err := m.Send(ctx, whole); err != nil {
		t.Fatal(err)
	}
	if err := m.Send(ctx, testMessage("none@example.org")); err != nil {
		t.Fatal(err)
	}

	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Prepare(KindIssue, Data{Subject: "March", IssueHTML: "<p>Hello</p>", IssueText: "Hello", ReplyTo: "letters@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 3
	for i := range batch {
		msg, err := p.RenderFor(m, Data{Email: fmt.Sprintf("reader%d@example.org", i),
			UnsubscribeURL: fmt.Sprintf("https://news.example.com/u?t=%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	srv.WaitFor(t, 2+batch, 10*time.Second)
	check := func(to, want string) {
		t.Helper()
		got := srv.To(to)
		if len(got) != 1 {
			t.Fatalf("%s: %d mails", to, len(got))
		}
		if h := strings.Join(got[0].Header["Reply-To"], ","); !strings.Contains(h, want) || (want == "") != (h == "") {
			t.Fatalf("%s: Reply-To %q, want %q", to, h, want)
		}
	}
	check("whole@example.org", "editor@example.com")
	check("none@example.org", "")
	for i := range batch {
		check(fmt.Sprintf("reader%d@example.org", i), "letters@example.com")
	}
	if fast, _, encoded := p.Counts(); fast != batch || encoded != batch {
		t.Fatalf("the batch's mails: %d filled in, %d from the encoded template; want %d each", fast, encoded, batch)
	}
}
