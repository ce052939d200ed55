package email

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
	m, err := NewSMTP(SMTPOptions{Server: cfg, PoolSize: pool, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// testMail is a composed mail to to, as mailer hands one over: a line
// that starts with a dot in its body, which DATA must stuff.
func testMail(to string) []byte {
	return []byte("From: News <news@example.com>\r\nTo: <" + to + ">\r\nSubject: Hi\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\ntext part\r\n.a dot line\r\n..two\r\n")
}

// sendTest sends testMail(to) from news@example.com through s.
func sendTest(ctx context.Context, s interface {
	SendRaw(ctx context.Context, from, to string, data []byte) error
}, to string) error {
	return s.SendRaw(ctx, "news@example.com", to, testMail(to))
}

// countingConn counts the writes the client makes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

type transportMode struct {
	name                     string
	noPipelining, noChunking bool
}

var transportModes = []transportMode{
	{"PIPELINING and CHUNKING", false, false},
	{"PIPELINING and DATA", false, true},
	{"CHUNKING one command at a time", true, false},
	{"DATA one command at a time", true, true},
}

func newModeSMTP(t *testing.T, srv *smtptest.Server, mode transportMode, writes *atomic.Int64) *SMTP {
	t.Helper()
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	o := SMTPOptions{Server: cfg, PoolSize: 1, Timeout: 5 * time.Second,
		dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, writes: writes}, nil
		}}
	m, err := NewSMTP(o)
	if err != nil {
		t.Fatal(err)
	}
	m.noPipelining, m.noChunking = mode.noPipelining, mode.noChunking
	t.Cleanup(func() { m.Close() })
	return m
}

// TestTransactionModes sends mails over one session in each way a server
// may allow (pipelined or not, BDAT or DATA): the server receives exactly
// the bytes handed over (lines that start with a dot included), refusals
// are classified and leave the connection usable, and with PIPELINING and
// CHUNKING a mail is one write. (mailer's TestTransactionModes checks
// that prepared mails arrive as go-mail writes them.)
func TestTransactionModes(t *testing.T) {
	faults := map[string]struct {
		fault *smtptest.Fault
		want  Class
	}{
		"gone":   {&smtptest.Fault{Err: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}}, Bounced},
		"grey":   {&smtptest.Fault{Err: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}}, Throttled},
		"policy": {&smtptest.Fault{AtData: true, Err: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "spam"}}, Rejected},
		"drop":   {&smtptest.Fault{Drop: true}, Temporary},
	}
	for _, mode := range transportModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := smtptest.Start(t)
			srv.SetScript(func(rcpt string, attempt int) *smtptest.Fault {
				if f, ok := faults[strings.Split(rcpt, "@")[0]]; ok && attempt == 1 {
					return f.fault
				}
				return nil
			})
			var writes atomic.Int64
			s := newModeSMTP(t, srv, mode, &writes)
			ctx := context.Background()
			sess, err := s.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			sent := map[string][]byte{}
			send := func(local string) error {
				to := local + "@x.org"
				data := testMail(to)
				if local == "r3" {
					data = data[:len(data)-2] // no final CRLF: the transport adds it
				}
				before := writes.Load()
				err := sess.SendRaw(ctx, "news@example.com", to, data)
				if err == nil {
					sent[to] = testMail(to)
					// (After the drop, the new connection's EHLO is written too.)
					if n := writes.Load() - before; !mode.noPipelining && !mode.noChunking && local != "after-drop" && n != 1 {
						t.Errorf("%s: %d writes for one mail; want 1", local, n)
					}
				}
				return err
			}
			for i := range 6 {
				if err := send(fmt.Sprintf("r%d", i)); err != nil {
					t.Fatalf("r%d: %v", i, err)
				}
			}
			for _, local := range []string{"gone", "grey", "policy", "drop"} {
				se := AsSendError(send(local))
				if se == nil || se.Class != faults[local].want || se.Domain != "x.org" {
					t.Errorf("%s: %v, want class %s", local, se, faults[local].want)
				}
				// The next mail goes through, on the same connection after
				// a refusal, on a new one after the drop.
				if err := send("after-" + local); err != nil {
					t.Errorf("after %s: %v", local, err)
				}
			}
			if n := srv.Sessions(); n != 2 {
				t.Errorf("%d connections; want 2 (a new one after the drop only)", n)
			}
			got := srv.WaitFor(t, len(sent), 5*time.Second)
			if len(got) != len(sent) {
				t.Fatalf("server accepted %d mails; %d were sent", len(got), len(sent))
			}
			for _, m := range got {
				if !bytes.Equal(m.Data, sent[m.To[0]]) {
					t.Fatalf("%s: the server got other bytes than were handed over:\n%q\nwant\n%q", m.To[0], m.Data, sent[m.To[0]])
				}
				if m.From != "news@example.com" {
					t.Errorf("envelope sender %q", m.From)
				}
			}
		})
	}
}

// TestSMTPRefusesABadEnvelope: an address that would break the command
// line is Invalid, and nothing is sent.
func TestSMTPRefusesABadEnvelope(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 1)
	se := AsSendError(m.SendRaw(context.Background(), "news@example.com", "a@x.org>\r\nRCPT TO:<b@x.org", testMail("a@x.org")))
	if se == nil || se.Class != Invalid || srv.Sessions() != 0 {
		t.Fatalf("%v, %d connections", se, srv.Sessions())
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
			if err := sendTest(context.Background(), m, fmt.Sprintf("u%d@example.org", i)); err != nil {
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
		err := sendTest(ctx, m, rcpt)
		se := AsSendError(err)
		if se == nil || se.Class != want || se.Domain != "x.org" {
			t.Errorf("%s: %v, want class %s", rcpt, err, want)
		}
		// Whatever broke, the next mail goes through (on a clean or new
		// connection).
		if err := sendTest(ctx, m, "ok-after-"+rcpt); err != nil {
			t.Errorf("send after %s: %v", rcpt, err)
		}
	}
	if se := AsSendError(sendTest(ctx, m, "gone@x.org")); se.Code != 550 || se.Enhanced != "5.1.1" {
		t.Fatalf("codes not carried: %+v", se)
	}
	// The dropped mail was not accepted; its retry is.
	if err := sendTest(ctx, m, "drop@x.org"); err != nil || len(srv.To("drop@x.org")) != 1 {
		t.Fatalf("retry after drop: %v, %d accepted", err, len(srv.To("drop@x.org")))
	}
}

func TestSMTPServerDown(t *testing.T) {
	m, err := NewSMTP(SMTPOptions{Server: Server{Host: "127.0.0.1", Port: 1, TLS: "none"}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	se := AsSendError(sendTest(context.Background(), m, "a@b.co"))
	if se == nil || !se.Temporary() {
		t.Fatalf("unreachable server must be temporary: %v", se)
	}
}

func TestSMTPClosesIdleConnections(t *testing.T) {
	srv := smtptest.Start(t)
	cfg, _ := ParseServerURL(srv.URL())
	m, err := NewSMTP(SMTPOptions{Server: cfg, PoolSize: 2, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := sendTest(context.Background(), m, "x@example.org"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 5*time.Second, "the idle connection to close", func() bool { return len(m.idle) == 0 && len(m.slots) == 0 })
	// The next mail opens a new connection.
	if err := sendTest(context.Background(), m, "y@example.org"); err != nil || srv.Sessions() != 2 {
		t.Fatalf("after the idle close: %v, %d connections", err, srv.Sessions())
	}
}

func TestSessionKeepsOneConnection(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 4)
	ctx := context.Background()
	sess, err := m.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := sendTest(ctx, sess, "s"+string(rune('a'+i))+"@example.org"); err != nil {
			t.Fatal(err)
		}
	}
	sess.Close()
	srv.WaitFor(t, 20, 5*time.Second)
	if srv.Sessions() != 1 {
		t.Fatalf("a batch of 20 used %d connections", srv.Sessions())
	}
	// The connection went back to the pool: the next send reuses it.
	if err := sendTest(ctx, m, "after@example.org"); err != nil || srv.Sessions() != 1 {
		t.Fatalf("after the session: %v, %d connections", err, srv.Sessions())
	}
}

// TestSMTPReconnectsWhenServerClosedIdleConnection: a gateway closes an
// idle connection; the next mail finds out with no reply at all, and goes
// on a new connection, once.
func TestSMTPReconnectsWhenServerClosedIdleConnection(t *testing.T) {
	for _, mode := range transportModes {
		t.Run(mode.name, func(t *testing.T) {
			srv := smtptest.Start(t)
			var writes atomic.Int64
			s := newModeSMTP(t, srv, mode, &writes)
			ctx := context.Background()
			if err := sendTest(ctx, s, "first@example.org"); err != nil {
				t.Fatal(err)
			}
			srv.WaitFor(t, 1, 5*time.Second)
			srv.DropConnections()
			if err := sendTest(ctx, s, "second@example.org"); err != nil {
				t.Fatalf("after the server closed the idle connection: %v", err)
			}
			srv.WaitFor(t, 2, 5*time.Second)
			if n, m := len(srv.To("second@example.org")), srv.Sessions(); n != 1 || m != 2 {
				t.Fatalf("second mail accepted %d times over %d connections; want once, 2", n, m)
			}
		})
	}
}

// TestSMTPRefusalsKeepTheConnection: refused mails are reset with RSET and
// the connection carries on, in every mode, also with many senders.
func TestSMTPRefusalsKeepTheConnection(t *testing.T) {
	srv := smtptest.Start(t)
	srv.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		if strings.HasPrefix(rcpt, "gone") {
			return &smtptest.Fault{Err: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}}
		}
		return nil
	})
	var writes atomic.Int64
	s := newModeSMTP(t, srv, transportModes[0], &writes)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := fmt.Sprintf("ok%d@example.org", i)
			if i%2 == 1 {
				to = fmt.Sprintf("gone%d@example.org", i)
			}
			err := sendTest(context.Background(), s, to)
			if se := AsSendError(err); (i%2 == 1) != (se != nil && se.Class == Bounced) {
				t.Errorf("%s: %v", to, err)
			}
		}()
	}
	wg.Wait()
	srv.WaitFor(t, 10, 5*time.Second)
	if n := srv.Sessions(); n != 1 {
		t.Fatalf("%d connections; refusals must not cost a connection", n)
	}
}
