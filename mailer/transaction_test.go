package mailer

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
)

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
	o := SMTPOptions{Server: cfg, From: "News <news@example.com>", PoolSize: 1, Timeout: 5 * time.Second,
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

// TestTransactionModes sends prepared digests over one session in each way
// a server may allow (pipelined or not, BDAT or DATA): the server receives
// exactly go-mail's bytes of the full render (lines that start with a dot
// included), refusals are classified as before and leave the connection
// usable, and with PIPELINING and CHUNKING a mail is one write.
func TestTransactionModes(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	// A summary of dots: quoted-printable's soft breaks start lines with a
	// dot, which DATA must stuff.
	entries := append([]Entry{{Title: "Dots", URL: "https://example.com/dots", Summary: strings.Repeat(".", 300)}}, encodeEntries...)
	shared := Data{Period: "2026-W49", Entries: entries, Topic: "Weekly digest"}
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
			p, err := r.Prepare(KindDigest, shared)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			sess, err := s.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			sent := map[string]*Message{}
			send := func(local, name string) error {
				d := Data{Email: local + "@x.org", Name: name, UnsubscribeURL: "https://n.example/u?token=" + local,
					PreferencesURL: "https://n.example/p?token=" + local}
				msg, err := p.Render(d)
				if err != nil {
					t.Fatal(err)
				}
				msg.ToName, msg.Tag = name, "tag-"+local
				before := writes.Load()
				err = sess.Send(ctx, msg)
				if err == nil {
					sent[msg.To] = msg
					// (After the drop, the new connection's EHLO is written too.)
					if n := writes.Load() - before; !mode.noPipelining && !mode.noChunking && local != "after-drop" && n != 1 {
						t.Errorf("%s: %d writes for one mail; want 1", local, n)
					}
				}
				return err
			}
			names := encodeNames()
			for i := range 12 {
				if err := send(fmt.Sprintf("r%d", i), names[i%len(names)]); err != nil {
					t.Fatalf("r%d: %v", i, err)
				}
			}
			for _, local := range []string{"gone", "grey", "policy", "drop"} {
				se := AsSendError(send(local, "Zoë"))
				if se == nil || se.Class != faults[local].want || se.Domain != "x.org" {
					t.Errorf("%s: %v, want class %s", local, se, faults[local].want)
				}
				// The next mail goes through, on the same connection after
				// a refusal, on a new one after the drop.
				if err := send("after-"+local, "Ann"); err != nil {
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
				msg := sent[m.To[0]]
				full, err := r.Render(KindDigest, withPersonal(shared, personalValues(Data{Email: msg.To, Name: msg.ToName,
					UnsubscribeURL: msg.UnsubscribeURL, PreferencesURL: "https://n.example/p?token=" + strings.Split(msg.To, "@")[0]})))
				if err != nil {
					t.Fatal(err)
				}
				full.ToName, full.Tag, full.MessageID, full.Date, full.boundary = msg.ToName, msg.Tag, msg.MessageID, msg.Date, msg.boundary
				want, err := s.writeGoMail(full, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.Data, want) {
					t.Fatalf("%s: the server got other bytes than go-mail's full render:\n%s", msg.To, diffContext(m.Data, want))
				}
				if m.From != "news@example.com" {
					t.Errorf("envelope sender %q", m.From)
				}
			}
			if fast, _, encoded := p.Counts(); encoded != fast || fast < 16 {
				t.Errorf("%d mails filled in, %d from the encoded template", fast, encoded)
			}
		})
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
			if err := s.Send(ctx, testMessage("first@example.org")); err != nil {
				t.Fatal(err)
			}
			srv.WaitFor(t, 1, 5*time.Second)
			srv.DropConnections()
			if err := s.Send(ctx, testMessage("second@example.org")); err != nil {
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
			err := s.Send(context.Background(), testMessage(to))
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
