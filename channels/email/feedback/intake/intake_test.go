package intake

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/smtp"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// queue records what the intake hands its Consumer, or fails like a
// Redis that is away.
type queue struct {
	mu     sync.Mutex
	events []feedback.Event
	fail   bool
}

func (q *queue) Consume(_ context.Context, ev feedback.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	q.events = append(q.events, ev)
	return nil
}

func (q *queue) count() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.events) }

func (q *queue) payloads(t *testing.T) []feedback.Event {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]feedback.Event(nil), q.events...)
}

var testTagger = feedback.NewTagger([]byte("0123456789abcdef"))

func start(t *testing.T, q *queue, cfg Config) (string, *Metrics) {
	t.Helper()
	m := NewMetrics(nil)
	cfg.BounceAddress, cfg.Tagger, cfg.Consumer, cfg.Metrics = "bounces@b.example.com", testTagger, q, m
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 128 << 10
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), m
}

func fixture(t *testing.T, name string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.NewReplacer(replace...).Replace(string(b)), "\n", "\r\n")
}

// postfixDSN is a DSN as Postfix writes it about our mail to rcpt, whose
// envelope sender and Message-ID carried tag ("" : a mail without one).
func postfixDSN(t *testing.T, rcpt, tag string) string {
	if tag == "" {
		return fixture(t, "postfix-dsn.eml", "+TAG@", "@", ".TAG@", "@", "RCPT", rcpt)
	}
	return fixture(t, "postfix-dsn.eml", "TAG", tag, "RCPT", rcpt)
}

// manyRecipients is a forged DSN with n failed recipient blocks (999: 79 KB).
func manyRecipients(n int, returnPath string) string {
	var b strings.Builder
	b.WriteString("From: MAILER-DAEMON@mx.example.net\r\nSubject: Undelivered Mail\r\nMessage-Id: <many@mx.example.net>\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.net\r\n")
	for i := range n {
		fmt.Fprintf(&b, "\r\nFinal-Recipient: rfc822; reader%03d@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 User unknown\r\n", i)
	}
	fmt.Fprintf(&b, "\r\n--b\r\nContent-Type: text/rfc822-headers\r\n\r\nReturn-Path: <%s>\r\nSubject: This week\r\n\r\n--b--\r\n", returnPath)
	return b.String()
}

func send(t *testing.T, addr, rcpt, body string) error {
	t.Helper()
	return smtp.SendMail(addr, nil, "", []string{rcpt}, []byte(body))
}

// TestIntakeBelievesOnlyVerifiedTags: the forged reports of a stranger
// who can reach the bounce MX (a DSN or an abuse report naming a reader
// with no tag, or with a tag that does not verify; one DSN with 999
// recipients) are accepted with 250, counted as unverified and queue
// nothing; the 999-recipient DSN with a good tag queues one event, not
// 999. A genuine Postfix DSN and an abuse report about a tagged mail queue
// one event each for the subscriber the tag names, not for the address
// the report states.
func TestIntakeBelievesOnlyVerifiedTags(t *testing.T) {
	q := &queue{}
	addr, m := start(t, q, Config{})
	unverified := func() float64 { return testutil.ToFloat64(m.Reports.WithLabelValues("unverified")) }
	forgedTag := "2n9c-d-000000000000" // well formed, wrong MAC
	otherKey := feedback.NewTagger([]byte("another secret!!")).Tag(42, "digest")

	forged := []struct{ name, rcpt, body string }{
		{"DSN without a tag", "bounces@b.example.com", postfixDSN(t, "victim@example.org", "")},
		{"DSN with a forged tag", "bounces+" + forgedTag + "@b.example.com", postfixDSN(t, "victim@example.org", forgedTag)},
		{"DSN with another key's tag", "bounces+" + otherKey + "@b.example.com", postfixDSN(t, "victim@example.org", otherKey)},
		{"abuse report without a tag", "bounces@b.example.com", fixture(t, "arf.eml", "bounces+TAG@", "bounces@", ".TAG@", "@", "reader@", "victim@")},
		{"abuse report with a forged tag", "bounces@b.example.com", fixture(t, "arf.eml", "TAG", forgedTag, "reader@", "victim@")},
		{"999 recipients without a tag", "bounces@b.example.com", manyRecipients(999, "bounces@b.example.com")},
	}
	for i, f := range forged {
		if err := send(t, addr, f.rcpt, f.body); err != nil {
			t.Fatalf("%s: %v (must be accepted, never bounced back)", f.name, err)
		}
		if q.count() != 0 || unverified() != float64(i+1) {
			t.Fatalf("%s: %d tasks queued, %v unverified; want none queued, counted unverified", f.name, q.count(), unverified())
		}
	}
	if n := testutil.ToFloat64(m.Reports.WithLabelValues("queued")); n != 0 {
		t.Fatalf("queued %v", n)
	}

	// 999 recipient blocks behind a good tag: one event, for the tag.
	tag := testTagger.Tag(41, "digest")
	big := manyRecipients(999, "bounces+"+tag+"@b.example.com")
	if len(big) < 64<<10 {
		t.Fatalf("set-up: the big DSN is %d bytes", len(big))
	}
	if err := send(t, addr, "bounces@b.example.com", big); err != nil {
		t.Fatal(err)
	}
	if got := q.payloads(t); len(got) != 1 || got[0].SubscriberID != 41 || got[0].Email != "" {
		t.Fatalf("999 recipients behind one tag queued %+v, want one event for subscriber 41", got)
	}

	// A genuine Postfix DSN, sent to the tagged return path of a
	// getting-started mail (a sequence step): the subscriber it names.
	tag = testTagger.Tag(42, "getting-started")
	if err := send(t, addr, "bounces+"+tag+"@b.example.com", postfixDSN(t, "gone@example.org", tag)); err != nil {
		t.Fatal(err)
	}
	// A genuine abuse report sent to the bare address: the tag of the
	// Message-ID and Original-Mail-From it quotes.
	tag = testTagger.Tag(43, "digest")
	if err := send(t, addr, "bounces@b.example.com", fixture(t, "arf.eml", "TAG", tag)); err != nil {
		t.Fatal(err)
	}
	got := q.payloads(t)
	if len(got) != 3 {
		t.Fatalf("queued %+v", got)
	}
	if p := got[1]; p.SubscriberID != 42 || p.Type != "hard" || p.Source != "smtp" || p.Email != "" || p.Kind != feedback.KindStep {
		t.Fatalf("Postfix DSN: %+v", p)
	}
	if p := got[2]; p.SubscriberID != 43 || p.Type != "complaint" || p.Email != "" || p.Kind != "digest" {
		t.Fatalf("abuse report: %+v", p)
	}
	if n := testutil.ToFloat64(m.Reports.WithLabelValues("queued")); n != 3 || unverified() != float64(len(forged)) {
		t.Fatalf("queued %v, unverified %v", n, unverified())
	}
}

// TestIntakeCountsWhatItCannotUse: junk and plain mail are accepted (250,
// never bounced back) and counted; other recipients and oversized mail
// are refused; a queue that is away makes a 451, so the sender keeps the
// report.
func TestIntakeCountsWhatItCannotUse(t *testing.T) {
	q := &queue{}
	addr, m := start(t, q, Config{MaxSize: 8 << 10})
	for name, body := range map[string]string{
		"plain mail": "Subject: out of office\r\n\r\nI am away.\r\n",
		"malformed":  "Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822; x@example.org\r\n",
	} {
		if err := send(t, addr, "bounces@b.example.com", body); err != nil {
			t.Fatalf("%s: %v (must be accepted, never bounced back)", name, err)
		}
	}
	if testutil.ToFloat64(m.Reports.WithLabelValues("not_report")) != 1 || testutil.ToFloat64(m.Reports.WithLabelValues("malformed")) != 1 || q.count() != 0 {
		t.Fatalf("junk: not_report %v, malformed %v, %d tasks", testutil.ToFloat64(m.Reports.WithLabelValues("not_report")),
			testutil.ToFloat64(m.Reports.WithLabelValues("malformed")), q.count())
	}
	tag := testTagger.Tag(7, "digest")
	dsn := postfixDSN(t, "gone@example.org", tag)
	if err := send(t, addr, "postmaster@b.example.com", dsn); err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("another recipient: %v", err)
	}
	if err := send(t, addr, "bounces@b.example.com", dsn+strings.Repeat(strings.Repeat("x", 70)+"\r\n", 300)); err == nil || !strings.Contains(err.Error(), "552") {
		t.Fatalf("oversized: %v", err)
	}
	q.mu.Lock()
	q.fail = true
	q.mu.Unlock()
	if err := send(t, addr, "bounces@b.example.com", dsn); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("queue away: %v, want 451", err)
	}
}

// client is a raw SMTP connection from a loopback address of its own.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: poll.BusyMachine}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// reply reads one (possibly multi-line) reply; "" when the server closed
// the connection.
func (c *client) reply(t *testing.T) string {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(poll.BusyMachine))
	var all string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return all
		}
		all += line
		if len(line) < 4 || line[3] != '-' {
			return all
		}
	}
}

func (c *client) cmd(t *testing.T, line string) string {
	t.Helper()
	if _, err := c.c.Write([]byte(line + "\r\n")); err != nil {
		return "" // closed by the server
	}
	return c.reply(t)
}

// TestIntakeCapsSessions: sessions over the caps (in all, and from one
// client) are answered 421 at once and closed; a place comes back when a
// session ends. Thousands of idle sessions cannot be held: a session kept
// open with NOOP alone ends at its idle limit, and one kept busy with MAIL
// and RSET at its session limit, each with a 421.
func TestIntakeCapsSessions(t *testing.T) {
	q := &queue{}
	addr, m := start(t, q, Config{MaxSessions: 3, MaxSessionsPerClient: 2, IdleTimeout: time.Hour, SessionTimeout: time.Hour})
	refused := func(reason string) float64 { return testutil.ToFloat64(m.SessionsRefused.WithLabelValues(reason)) }

	a1, a2 := dial(t, addr, "127.0.0.1"), dial(t, addr, "127.0.0.1")
	for _, c := range []*client{a1, a2} {
		if got := c.reply(t); !strings.HasPrefix(got, "220 ") {
			t.Fatalf("greeting %q", got)
		}
	}
	if got := dial(t, addr, "127.0.0.1").reply(t); !strings.HasPrefix(got, "421 ") || refused("per_client") != 1 {
		t.Fatalf("third session from one client: %q (per_client %v), want 421", got, refused("per_client"))
	}
	b1 := dial(t, addr, "127.0.0.2")
	if got := b1.reply(t); !strings.HasPrefix(got, "220 ") {
		t.Fatalf("another client: %q", got)
	}
	if got := dial(t, addr, "127.0.0.3").reply(t); !strings.HasPrefix(got, "421 ") || refused("max_sessions") != 1 {
		t.Fatalf("a fourth session: %q (max_sessions %v), want 421", got, refused("max_sessions"))
	}
	if n := testutil.ToFloat64(m.Sessions); n != 3 {
		t.Fatalf("open sessions %v", n)
	}
	// A session that ends gives its place back.
	if got := a1.cmd(t, "QUIT"); !strings.HasPrefix(got, "221 ") {
		t.Fatalf("QUIT: %q", got)
	}
	poll.True(t, poll.BusyMachine, "a new session once one ended", func() bool {
		return strings.HasPrefix(dial(t, addr, "127.0.0.3").reply(t), "220 ")
	})
}

func TestIntakeEndsIdleAndLongSessions(t *testing.T) {
	q := &queue{}
	// NOOP alone: idle, whatever the rate.
	addr, _ := start(t, q, Config{IdleTimeout: 200 * time.Millisecond, SessionTimeout: time.Hour})
	c := dial(t, addr, "127.0.0.1")
	c.reply(t)
	if got := c.cmd(t, "EHLO mx.example.net"); !strings.HasPrefix(got, "250") {
		t.Fatalf("EHLO %q", got)
	}
	last := ""
	poll.True(t, poll.BusyMachine, "an idle session kept with NOOP to end", func() bool {
		last = c.cmd(t, "NOOP")
		return !strings.HasPrefix(last, "250 ")
	})
	if last != "" && !strings.HasPrefix(last, "421 ") {
		t.Fatalf("an idle session ended with %q, want 421 or a close", last)
	}

	// MAIL and RSET over and over: busy, but not for longer than the
	// session's limit.
	addr, _ = start(t, q, Config{IdleTimeout: time.Hour, SessionTimeout: 300 * time.Millisecond})
	c = dial(t, addr, "127.0.0.1")
	c.reply(t)
	c.cmd(t, "EHLO mx.example.net")
	poll.True(t, poll.BusyMachine, "a busy session to end at its limit", func() bool {
		last = c.cmd(t, "MAIL FROM:<>")
		if strings.HasPrefix(last, "250 ") {
			last = c.cmd(t, "RSET")
		}
		return !strings.HasPrefix(last, "250 ")
	})
	if last != "" && !strings.HasPrefix(last, "421 ") {
		t.Fatalf("a long session ended with %q, want 421 or a close", last)
	}
	if q.count() != 0 {
		t.Fatal("queued from an empty session")
	}
}

// TestIntakeDefaultCaps: with no limits configured, one client cannot
// hold more than DefaultMaxSessionsPerClient sessions (the thousands of
// idle sessions of a stranger).
func TestIntakeDefaultCaps(t *testing.T) {
	addr, m := start(t, &queue{}, Config{})
	for i := range DefaultMaxSessionsPerClient {
		if got := dial(t, addr, "127.0.0.1").reply(t); !strings.HasPrefix(got, "220 ") {
			t.Fatalf("session %d: %q", i+1, got)
		}
	}
	if got := dial(t, addr, "127.0.0.1").reply(t); !strings.HasPrefix(got, "421 ") {
		t.Fatalf("session %d from one client: %q, want 421", DefaultMaxSessionsPerClient+1, got)
	}
	if n := testutil.ToFloat64(m.SessionsRefused.WithLabelValues("per_client")); n != 1 {
		t.Fatalf("refused per_client %v", n)
	}
}
