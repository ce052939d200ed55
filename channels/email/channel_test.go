package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email/sestest"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// batchOf is one composed mail per recipient, from a VERP return path of
// its own, as the worker hands a batch over.
func batchOf(tos ...string) []channels.Message {
	out := make([]channels.Message, len(tos))
	for i, to := range tos {
		local, _, _ := strings.Cut(to, "@")
		out[i] = channels.Message{To: to, Body: testMail(to), Attrs: map[string]string{AttrFrom: "bounces+" + local + "@b.example.com"}}
	}
	return out
}

// verdicts are the outcomes' verdicts, to compare in one line.
func verdicts(out []channels.Outcome) []channels.Verdict {
	v := make([]channels.Verdict, len(out))
	for i, o := range out {
		v[i] = o.Verdict
	}
	return v
}

func sameVerdicts(a, b []channels.Verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// refusal is a scripted SMTP reply.
func refusal(code int, enhanced smtp.EnhancedCode, msg string, atData bool) *smtptest.Fault {
	return &smtptest.Fault{AtData: atData, Err: &smtp.SMTPError{Code: code, EnhancedCode: enhanced, Message: msg}}
}

// scriptByLocal scripts the server by the recipient's local part (every
// attempt).
func scriptByLocal(srv *smtptest.Server, faults map[string]*smtptest.Fault) {
	srv.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		local, _, _ := strings.Cut(rcpt, "@")
		return faults[local]
	})
}

func TestChannelSpec(t *testing.T) {
	srv := smtptest.Start(t)
	if got, want := (Channel{Transport: newTestSMTP(t, srv, 1)}).Spec(), (channels.Spec{Name: "email", MaxBatch: MaxBatch, MaxBody: 0}); got != want {
		t.Errorf("SMTP: %+v, want %+v", got, want)
	}
	if MaxBatch < 2 {
		t.Errorf("MaxBatch %d: the SMTP channel must batch", MaxBatch)
	}
	ses := newTestSES(t, sestest.Start(t, "us-east-1"))
	if got, want := (Channel{Transport: ses}).Spec(), (channels.Spec{Name: "email", MaxBatch: 1, MaxBody: SESMaxBody}); got != want {
		t.Errorf("SES: %+v, want %+v", got, want)
	}
}

// TestChannelSendsABatchOverOneSession: in every way a server may allow
// (pipelined or not, BDAT or DATA), a batch goes over one connection,
// every mail Sent with its bytes and envelope as handed over; pipelined
// with CHUNKING, each mail is one write; each Sent carries the queue id
// the server named it by; the connection goes back to the pool.
func TestChannelSendsABatchOverOneSession(t *testing.T) {
	const n = 12
	for _, mode := range transportModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := smtptest.StartWith(t, smtptest.Options{QueueIDs: true})
			var writes atomic.Int64
			s := newModeSMTP(t, srv, mode, &writes)
			// The connection is opened first, so the batch's writes are
			// its mails' alone.
			if err := sendTest(context.Background(), s, "warm@x.org"); err != nil {
				t.Fatal(err)
			}
			tos := make([]string, n)
			for i := range tos {
				tos[i] = fmt.Sprintf("r%d@x.org", i)
			}
			batch := batchOf(tos...)
			before := writes.Load()
			out := Channel{Transport: s}.Send(context.Background(), batch)
			if len(out) != n {
				t.Fatalf("%d outcomes for %d mails", len(out), n)
			}
			for i, o := range out {
				if o.Verdict != channels.Sent || o.Err != nil {
					t.Errorf("%s: %v %v", tos[i], o.Verdict, o.Err)
				}
			}
			if w := writes.Load() - before; !mode.noPipelining && !mode.noChunking && w != n {
				t.Errorf("%d writes for %d mails; pipelined with BDAT each is one", w, n)
			}
			if c := srv.Sessions(); c != 1 {
				t.Errorf("%d connections; a batch goes over one (the pool's)", c)
			}
			got := srv.WaitFor(t, n+1, 5*time.Second)[1:]
			if len(got) != n {
				t.Fatalf("server accepted %d of %d", len(got), n)
			}
			for i, m := range got {
				if m.To[0] != tos[i] || m.From != batch[i].Attrs[AttrFrom] || !bytes.Equal(m.Data, batch[i].Body) {
					t.Errorf("mail %d: %s from %s, %d bytes; want %s from %s, the bytes handed over", i, m.To[0], m.From, len(m.Data), tos[i], batch[i].Attrs[AttrFrom])
				}
				if m.QueueID == "" || out[i].ProviderID != m.QueueID {
					t.Errorf("mail %d: provider id %q; the server queued it as %q", i, out[i].ProviderID, m.QueueID)
				}
			}
			if len(s.idle) != 1 {
				t.Errorf("%d idle connections after the batch; want its one back in the pool", len(s.idle))
			}
		})
	}
}

// TestChannelRefusalsAnswerTheirMailOnly: a refused mail answers its own
// verdict (550 for the recipient retires, 552 and 554 for the message
// drop, 4xx retries) and the rest of the batch goes on, on the same
// connection (RSET after each refusal).
func TestChannelRefusalsAnswerTheirMailOnly(t *testing.T) {
	faults := map[string]*smtptest.Fault{
		"gone":   refusal(550, smtp.EnhancedCode{5, 1, 1}, "user unknown", false),
		"nobody": refusal(550, smtp.NoEnhancedCode, "no such mailbox", false),
		"big":    refusal(552, smtp.EnhancedCode{5, 3, 4}, "Message size exceeds fixed limit", true),
		"spam":   refusal(554, smtp.EnhancedCode{5, 7, 1}, "content rejected", true),
		"grey":   refusal(451, smtp.EnhancedCode{4, 7, 1}, "greylisted, try again later", false),
		"busy":   refusal(452, smtp.EnhancedCode{4, 3, 1}, "insufficient system storage", true),
	}
	tos := []string{"ok0@x.org", "gone@x.org", "ok1@x.org", "nobody@x.org", "big@x.org", "ok2@x.org",
		"spam@x.org", "grey@x.org", "ok3@x.org", "busy@x.org", "ok4@x.org"}
	want := []channels.Verdict{channels.Sent, channels.Retire, channels.Sent, channels.Retire, channels.Drop, channels.Sent,
		channels.Drop, channels.Retry, channels.Sent, channels.Retry, channels.Sent}
	for _, mode := range transportModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := smtptest.Start(t)
			scriptByLocal(srv, faults)
			var writes atomic.Int64
			s := newModeSMTP(t, srv, mode, &writes)
			out := Channel{Transport: s}.Send(context.Background(), batchOf(tos...))
			if got := verdicts(out); !sameVerdicts(got, want) {
				t.Fatalf("verdicts %v, want %v", got, want)
			}
			for i, o := range out {
				if (o.Verdict == channels.Sent) != (o.Err == nil) {
					t.Errorf("%s: %v with error %v", tos[i], o.Verdict, o.Err)
				}
				if o.Verdict != channels.Sent && AsSendError(o.Err) == nil {
					t.Errorf("%s: %v is not a SendError", tos[i], o.Err)
				}
			}
			if se := AsSendError(out[1].Err); se.Code != 550 || se.Enhanced != "5.1.1" || se.Domain != "x.org" {
				t.Errorf("the 550's codes not carried: %+v", se)
			}
			if se := AsSendError(out[7].Err); se.Class != Throttled {
				t.Errorf("a 4.7.1 is %s, want throttled (for the worker's domain pacing)", se.Class)
			}
			got := srv.WaitFor(t, 5, 5*time.Second)
			for i, m := range got {
				if m.To[0] != fmt.Sprintf("ok%d@x.org", i) {
					t.Errorf("accepted %d: %s", i, m.To[0])
				}
			}
			if len(got) != 5 || srv.Sessions() != 1 {
				t.Fatalf("%d accepted over %d connections; want the 5 ok over 1", len(got), srv.Sessions())
			}
		})
	}
}

// TestChannelConnectionBrokenMidBatch: the connection drops during a
// mail's DATA: the mails before it are Sent, it and the rest answer
// Retry, the rest untried; the next Send takes a new connection.
func TestChannelConnectionBrokenMidBatch(t *testing.T) {
	for _, mode := range transportModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := smtptest.Start(t)
			scriptByLocal(srv, map[string]*smtptest.Fault{"drop": {Drop: true}})
			var writes atomic.Int64
			s := newModeSMTP(t, srv, mode, &writes)
			tos := []string{"a0@x.org", "a1@x.org", "drop@x.org", "a3@x.org", "a4@x.org"}
			out := Channel{Transport: s}.Send(context.Background(), batchOf(tos...))
			want := []channels.Verdict{channels.Sent, channels.Sent, channels.Retry, channels.Retry, channels.Retry}
			if got := verdicts(out); !sameVerdicts(got, want) {
				t.Fatalf("verdicts %v, want %v", got, want)
			}
			if errors.Is(out[2].Err, ErrNotSent) {
				t.Errorf("the mail that met the drop was tried: %v", out[2].Err)
			}
			for _, i := range []int{3, 4} {
				if !errors.Is(out[i].Err, ErrNotSent) || srv.Attempts(tos[i]) != 0 {
					t.Errorf("%s: %v after %d attempts; want ErrNotSent, untried", tos[i], out[i].Err, srv.Attempts(tos[i]))
				}
			}
			if got := srv.WaitFor(t, 2, 5*time.Second); len(got) != 2 {
				t.Fatalf("%d accepted, want a0 and a1", len(got))
			}
			out = Channel{Transport: s}.Send(context.Background(), batchOf(tos[3:]...))
			if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Sent, channels.Sent}) || srv.Sessions() != 2 {
				t.Fatalf("the retry: %v over %d connections; want both Sent over a second", got, srv.Sessions())
			}
		})
	}
}

// TestChannelCanceledContext: a ctx canceled before the batch answers
// Retry for all and opens nothing; one canceled during a mail lets that
// mail finish and answers Retry for the mails not begun.
func TestChannelCanceledContext(t *testing.T) {
	srv := smtptest.Start(t)
	s := newTestSMTP(t, srv, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := Channel{Transport: s}.Send(ctx, batchOf("a@x.org", "b@x.org"))
	if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Retry, channels.Retry}) || srv.Sessions() != 0 {
		t.Fatalf("canceled before: %v over %d connections", got, srv.Sessions())
	}
	if !errors.Is(out[0].Err, context.Canceled) {
		t.Errorf("the answer does not say why: %v", out[0].Err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	srv.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		if strings.HasPrefix(rcpt, "c1@") {
			cancel() // before the server answers c1's RCPT
		}
		return nil
	})
	out = Channel{Transport: s}.Send(ctx, batchOf("c0@x.org", "c1@x.org", "c2@x.org", "c3@x.org"))
	want := []channels.Verdict{channels.Sent, channels.Sent, channels.Retry, channels.Retry}
	if got := verdicts(out); !sameVerdicts(got, want) {
		t.Fatalf("canceled during c1: %v, want %v", got, want)
	}
	if !errors.Is(out[2].Err, context.Canceled) || srv.Attempts("c2@x.org")+srv.Attempts("c3@x.org") != 0 {
		t.Errorf("c2: %v; c2 and c3 tried %d times", out[2].Err, srv.Attempts("c2@x.org")+srv.Attempts("c3@x.org"))
	}
	if len(s.idle) != 1 {
		t.Errorf("%d idle connections; the canceled batch's goes back", len(s.idle))
	}
}

// TestChannelRefusedLoginPauses: a relay that refuses our login (535 at
// AUTH) or mail without one (530 at MAIL) refuses every mail alike:
// the lane pauses for AuthPause.
func TestChannelRefusedLoginPauses(t *testing.T) {
	srv := smtptest.StartWith(t, smtptest.Options{STARTTLS: true, Username: "relay", Password: "s3cret"})
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = "starttls"
	for name, c := range map[string]struct {
		user, pass string
		code       int
	}{"wrong password": {"relay", "wrong", 535}, "no login": {"", "", 530}} {
		cfg.Username, cfg.Password = c.user, c.pass
		s, err := NewSMTP(SMTPOptions{Server: cfg, TLSConfig: srv.ClientTLS(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out := Channel{Transport: s}.Send(context.Background(), batchOf("a@x.org", "b@x.org"))
		for i, o := range out {
			if o.Verdict != channels.Pause || o.After != AuthPause || !strings.Contains(fmt.Sprint(o.Err), fmt.Sprint(c.code)) {
				t.Errorf("%s: mail %d: %v after %s (%v); want paused for %s by a %d", name, i, o.Verdict, o.After, o.Err, AuthPause, c.code)
			}
		}
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d accepted without a login", n)
	}
}

// TestChannelServerDown: no server answers: every mail is retried.
func TestChannelServerDown(t *testing.T) {
	s, err := NewSMTP(SMTPOptions{Server: Server{Host: "127.0.0.1", Port: 1, TLS: "none"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := Channel{Transport: s}.Send(context.Background(), batchOf("a@x.org", "b@y.org"))
	for i, o := range out {
		if se := AsSendError(o.Err); o.Verdict != channels.Retry || se == nil || se.Class != Temporary {
			t.Errorf("mail %d: %v (%v); want Retry, temporary", i, o.Verdict, o.Err)
		}
	}
}

// TestChannelDropsWhatCannotBeSent: a mail without a sender or with an
// address that would break the command line is dropped unsent; the others
// go; a batch of only such mails opens no connection.
func TestChannelDropsWhatCannotBeSent(t *testing.T) {
	srv := smtptest.Start(t)
	s := newTestSMTP(t, srv, 1)
	bad := batchOf("nofrom@x.org", "evil@x.org")
	delete(bad[0].Attrs, AttrFrom)
	bad[1].To = "evil@x.org>\r\nRCPT TO:<other@x.org"
	out := Channel{Transport: s}.Send(context.Background(), bad)
	if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Drop, channels.Drop}) || srv.Sessions() != 0 {
		t.Fatalf("%v over %d connections", got, srv.Sessions())
	}
	mixed := append(batchOf("ok0@x.org"), bad[0], batchOf("ok1@x.org")[0])
	out = Channel{Transport: s}.Send(context.Background(), mixed)
	if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Sent, channels.Drop, channels.Sent}) {
		t.Fatalf("mixed: %v", got)
	}
	if got := srv.WaitFor(t, 2, 5*time.Second); len(got) != 2 || srv.Attempts("other@x.org") != 0 {
		t.Fatalf("%d accepted, the injected recipient tried %d times", len(got), srv.Attempts("other@x.org"))
	}
}

// TestChannelSplitsABatchOverMaxBatch: a batch over MaxBatch goes in runs
// of MaxBatch, each over a connection of the pool, in order.
func TestChannelSplitsABatchOverMaxBatch(t *testing.T) {
	srv := smtptest.Start(t)
	s := newTestSMTP(t, srv, 1)
	tos := make([]string, MaxBatch+3)
	for i := range tos {
		tos[i] = fmt.Sprintf("m%d@x.org", i)
	}
	out := Channel{Transport: s}.Send(context.Background(), batchOf(tos...))
	for i, o := range out {
		if o.Verdict != channels.Sent {
			t.Fatalf("%s: %v %v", tos[i], o.Verdict, o.Err)
		}
	}
	got := srv.WaitFor(t, len(tos), 10*time.Second)
	for i, m := range got {
		if m.To[0] != tos[i] {
			t.Fatalf("mail %d went to %s; want %s", i, m.To[0], tos[i])
		}
	}
}

// TestSESChannelSendsOneByOne: a mail per SendEmail, each Sent with the
// MessageId SES gave; a refused mail drops; a sending pause pauses the
// lane, and the mails after it are held without asking SES.
func TestSESChannelSendsOneByOne(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	srv.SetScript(func(rcpt string, _ int) *sestest.Fault {
		switch rcpt {
		case "rejected@x.org":
			return &sestest.Fault{Code: "MessageRejected"}
		case "paused@x.org":
			return &sestest.Fault{Code: "SendingPausedException"}
		}
		return nil
	})
	s := newTestSES(t, srv, func(o *SESOptions) { o.PauseFor = 7 * time.Minute })
	tos := []string{"a@x.org", "rejected@x.org", "b@x.org", "paused@x.org", "c@x.org"}
	batch := batchOf(tos...)
	out := Channel{Transport: s}.Send(context.Background(), batch)
	want := []channels.Verdict{channels.Sent, channels.Drop, channels.Sent, channels.Pause, channels.Pause}
	if got := verdicts(out); !sameVerdicts(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if out[3].After != 7*time.Minute || out[4].After <= 0 || srv.Attempts("c@x.org") != 0 {
		t.Errorf("pause for %s, then %s; c tried %d times", out[3].After, out[4].After, srv.Attempts("c@x.org"))
	}
	msgs := srv.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d accepted", len(msgs))
	}
	for i, o := range []channels.Outcome{out[0], out[2]} {
		m := msgs[i]
		if o.ProviderID == "" || o.ProviderID != m.MessageID {
			t.Errorf("mail %d: provider id %q; SES answered %q", i, o.ProviderID, m.MessageID)
		}
		if m.FeedbackTo != batch[2*i].Attrs[AttrFrom] || !bytes.Equal(m.Data, batch[2*i].Body) {
			t.Errorf("mail %d: feedback to %q; the bytes changed: %v", i, m.FeedbackTo, !bytes.Equal(m.Data, batch[2*i].Body))
		}
	}
}

// TestSESChannelPausesOnAccessDenied: SES refusing our account (no
// permission to send) pauses the lane for AuthPause, the mail kept.
func TestSESChannelPausesOnAccessDenied(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	srv.SetScript(func(rcpt string, _ int) *sestest.Fault {
		return &sestest.Fault{Status: http.StatusForbidden, Code: "AccessDeniedException"}
	})
	out := Channel{Transport: newTestSES(t, srv)}.Send(context.Background(), batchOf("a@x.org"))
	if o := out[0]; o.Verdict != channels.Pause || o.After != AuthPause || srv.Attempts("a@x.org") != 1 {
		t.Fatalf("%v after %s (%v), %d requests; want paused for %s", o.Verdict, o.After, o.Err, srv.Attempts("a@x.org"), AuthPause)
	}
}

// TestSESChannelDropsTooLarge: a mail over SESMaxBody is dropped without
// a request.
func TestSESChannelDropsTooLarge(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	s := newTestSES(t, srv)
	batch := batchOf("big@x.org")
	batch[0].Body = make([]byte, SESMaxBody+1)
	out := Channel{Transport: s}.Send(context.Background(), batch)
	if out[0].Verdict != channels.Drop || !errors.Is(out[0].Err, ErrTooLarge) || srv.Attempts("big@x.org") != 0 {
		t.Fatalf("%v (%v), %d requests", out[0].Verdict, out[0].Err, srv.Attempts("big@x.org"))
	}
}

func TestClassify(t *testing.T) {
	reply := func(step string, code int, msg string) error {
		return classify(&replyError{step: step, code: code, msg: msg}, "x.org")
	}
	cases := []struct {
		name  string
		err   error
		want  channels.Verdict
		after time.Duration
	}{
		{"550 5.1.1 at RCPT", reply("RCPT", 550, "5.1.1 user unknown"), channels.Retire, 0},
		{"bare 550 at RCPT", reply("RCPT", 550, "no such user"), channels.Retire, 0},
		{"553 5.1.3 at RCPT", reply("RCPT", 553, "5.1.3 bad address syntax"), channels.Retire, 0},
		{"552 5.3.4 at end of data", reply("end of data", 552, "5.3.4 message too big"), channels.Drop, 0},
		{"bare 552 at end of data", reply("end of data", 552, "too big"), channels.Drop, 0},
		{"554 5.7.1 at end of data", reply("end of data", 554, "5.7.1 content rejected"), channels.Drop, 0},
		{"554 at DATA", reply("DATA", 554, "transaction failed"), channels.Drop, 0},
		{"552 at RCPT (RFC 5321 4.5.3.1.10)", reply("RCPT", 552, "too many recipients"), channels.Retry, 0},
		{"451 4.3.0", reply("end of data", 451, "4.3.0 try later"), channels.Retry, 0},
		{"450 4.2.1 at RCPT", reply("RCPT", 450, "4.2.1 mailbox busy"), channels.Retry, 0},
		{"421 4.4.5", reply("MAIL", 421, "4.4.5 too busy"), channels.Retry, 0},
		{"530 at MAIL", reply("MAIL", 530, "5.7.0 Authentication required"), channels.Pause, AuthPause},
		{"535 at AUTH when dialling", &SendError{Class: Temporary, Err: fmt.Errorf("connect: SMTP AUTH failed: %w", &textproto.Error{Code: 535, Msg: "5.7.8 Authentication failed"})}, channels.Pause, AuthPause},
		{"421 greeting when dialling", &SendError{Class: Temporary, Err: fmt.Errorf("connect: %w", &textproto.Error{Code: 421, Msg: "busy"})}, channels.Retry, 0},
		{"connection refused", classify(errors.New("dial tcp: connection refused"), "x.org"), channels.Retry, 0},
		{"invalid", &SendError{Class: Invalid, Err: errors.New("template")}, channels.Drop, 0},
		{"retry after", &SendError{Class: Temporary, RetryAfter: 3 * time.Second, Err: errors.New("slow")}, channels.Retry, 3 * time.Second},
		{"paused", &SendError{Class: Temporary, RetryAfter: time.Minute, Err: &PausedError{Reason: "SES", In: time.Minute}}, channels.Pause, time.Minute},
		{"not a SendError", context.DeadlineExceeded, channels.Retry, 0},
	}
	for _, c := range cases {
		o := Classify("", c.err)
		if o.Verdict != c.want || o.After != c.after || o.Err != c.err {
			t.Errorf("%s: %v after %s (err %v); want %v after %s", c.name, o.Verdict, o.After, o.Err, c.want, c.after)
		}
	}
	if o := Classify("4Q1b2c", nil); o.Verdict != channels.Sent || o.ProviderID != "4Q1b2c" || o.Err != nil {
		t.Errorf("accepted: %+v", o)
	}
}

func TestQueueID(t *testing.T) {
	for reply, want := range map[string]string{
		"2.0.0 Ok: queued as 4Q1b2c3d4eZ":                        "4Q1b2c3d4eZ",
		"OK id=1rAbCd-000Efg-Hi":                                 "1rAbCd-000Efg-Hi",
		"Ok 0100018c2a1b2c3d-aaaa-bbbb-000000":                   "0100018c2a1b2c3d-aaaa-bbbb-000000",
		"2.0.0 OK: queued":                                       "",
		"2.0.0 OK  1733560000 d2e1a72fcca58-1234abcd.99 - gsmtp": "",
		"": "",
	} {
		if got := queueID(reply); got != want {
			t.Errorf("%q: %q, want %q", reply, got, want)
		}
	}
}

// TestChannelLeavesTheBodiesAlone: a batch's bodies packed in one buffer,
// the first without its final CRLF (which the transport adds): each
// arrives as handed over, and the buffer is as it was.
func TestChannelLeavesTheBodiesAlone(t *testing.T) {
	srv := smtptest.Start(t)
	s := newTestSMTP(t, srv, 1)
	first, second := testMail("a@x.org"), testMail("b@x.org")
	first = first[:len(first)-2]
	packed := append(append([]byte(nil), first...), second...)
	keep := bytes.Clone(packed)
	batch := batchOf("a@x.org", "b@x.org")
	batch[0].Body, batch[1].Body = packed[:len(first)], packed[len(first):]
	out := Channel{Transport: s}.Send(context.Background(), batch)
	if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Sent, channels.Sent}) {
		t.Fatalf("%v", got)
	}
	if !bytes.Equal(packed, keep) {
		t.Fatalf("the caller's buffer changed:\n%q\nwant\n%q", packed, keep)
	}
	got := srv.WaitFor(t, 2, 5*time.Second)
	if !bytes.Equal(got[1].Data, second) || !bytes.Equal(got[0].Data, testMail("a@x.org")) {
		t.Fatalf("the server got other bytes:\n%q\n%q", got[0].Data, got[1].Data)
	}
}

// TestChannel421EndsTheSession: a 421 (service not available, closing the
// channel; RFC 5321 3.8) retries its mail and, untried, the rest: the
// connection is given up, and the next Send takes a new one.
func TestChannel421EndsTheSession(t *testing.T) {
	srv := smtptest.Start(t)
	srv.SetScript(func(rcpt string, attempt int) *smtptest.Fault {
		if strings.HasPrefix(rcpt, "closing@") && attempt == 1 {
			return refusal(421, smtp.EnhancedCode{4, 3, 2}, "System not accepting network messages", false)
		}
		return nil
	})
	s := newTestSMTP(t, srv, 1)
	tos := []string{"a@x.org", "closing@x.org", "b@x.org"}
	out := Channel{Transport: s}.Send(context.Background(), batchOf(tos...))
	if got, want := verdicts(out), []channels.Verdict{channels.Sent, channels.Retry, channels.Retry}; !sameVerdicts(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if se := AsSendError(out[1].Err); se == nil || se.Code != 421 || !errors.Is(out[2].Err, ErrNotSent) || srv.Attempts("b@x.org") != 0 {
		t.Fatalf("421: %v; then %v after %d attempts", out[1].Err, out[2].Err, srv.Attempts("b@x.org"))
	}
	out = Channel{Transport: s}.Send(context.Background(), batchOf(tos[1:]...))
	if got := verdicts(out); !sameVerdicts(got, []channels.Verdict{channels.Sent, channels.Sent}) || srv.Sessions() != 2 {
		t.Fatalf("the retry: %v over %d connections; want both Sent over a second", got, srv.Sessions())
	}
}
