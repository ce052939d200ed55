package email

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	gosmtp "github.com/wneessen/go-mail/smtp"
)

// A mail's SMTP transaction is written here, on the connection go-mail
// dialled, secured and authenticated. go-mail's own send path issues MAIL,
// RCPT and DATA one at a time, a round trip each, and writes the message
// through net/textproto's DATA writer, which looks at every byte for
// dot-stuffing and hands the socket small writes. Here the commands go
// together where the server offers PIPELINING (RFC 2920), and the message
// in the same write as BDAT (RFC 3030) where it offers CHUNKING, so it
// needs no dot-stuffing: one write and one round trip per mail. Without
// CHUNKING the message follows DATA's 354 in a second write, dot-stuffed
// by a scan for line starts.
//
// go-mail still does everything else: dialling, STARTTLS, AUTH, EHLO and
// QUIT here, and in mailer the MIME of every mail that is not encoded from
// a prepared template (mailer/encode.go). Those are many lines of protocol
// we have no reason to own; the transaction is where the time per mail
// goes.

// pooledConn is one SMTP connection with what the transaction needs.
type pooledConn struct {
	c        *gosmtp.Client
	lastUsed time.Time
	// The server's extensions, read once after EHLO.
	pipelining, chunking, smtputf8 bool
	// out is reused from mail to mail: the bytes of a transaction.
	out []byte
}

func (s *SMTP) newPooledConn(c *gosmtp.Client) *pooledConn {
	pc := &pooledConn{c: c, lastUsed: s.now()}
	pc.pipelining, _ = c.Extension("PIPELINING")
	pc.chunking, _ = c.Extension("CHUNKING")
	pc.smtputf8, _ = c.Extension("SMTPUTF8")
	pc.pipelining = pc.pipelining && !s.noPipelining
	pc.chunking = pc.chunking && !s.noChunking
	return pc
}

// envelope is who a message goes from and to.
type envelope struct{ from, to string }

// replyError is a server's refusal at one step of a transaction.
type replyError struct {
	step string // MAIL, RCPT, DATA, BDAT or "end of data"
	code int
	msg  string
	// broken: the connection cannot carry another mail (421, or the RSET
	// after the refusal failed).
	broken bool
}

func (e *replyError) Error() string { return fmt.Sprintf("%s: %d %s", e.step, e.code, e.msg) }

// transportError is a network failure (or a reply that is not SMTP) in a
// transaction: the connection's state is unknown and it is closed.
type transportError struct {
	step string
	// replied: some reply of this transaction arrived before the failure.
	replied bool
	err     error
}

func (e *transportError) Error() string { return e.step + ": " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// noReply reports a network failure before any reply to the transaction:
// on a reused connection, the server closed it while it was idle. With
// pipelining the message may have been written by then; whether it was
// taken is as unknown as after a connection lost at the end of DATA, which
// the caller also sends again (the task's retry), so trying once more on a
// fresh connection at once doubles nothing that waiting would not.
func noReply(err error) bool {
	var te *transportError
	return errors.As(err, &te) && !te.replied
}

// step is one command of a transaction and the reply it wants.
type step struct {
	name string
	want int // 2: any 2xx; 354
}

// transact sends data (a whole message, CRLF line ends) from env.from to
// env.to over pc. It answers the text of the server's last reply, which
// may name the accepted mail (queueID).
func (s *SMTP) transact(pc *pooledConn, env envelope, data []byte) (string, error) {
	t := &txn{pc: pc}
	err := s.transactOn(t, env, data)
	return t.last, err
}

func (s *SMTP) transactOn(t *txn, env envelope, data []byte) error {
	pc := t.pc
	pc.out = pc.out[:0]
	if err := pc.c.UpdateDeadline(s.timeout); err != nil {
		return &transportError{step: "MAIL", err: err}
	}
	mail := "MAIL FROM:<" + env.from + ">"
	if pc.smtputf8 && !(ascii(env.from) && ascii(env.to)) {
		mail += " SMTPUTF8"
	}
	rcpt := "RCPT TO:<" + env.to + ">"
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		// As DATA ends it, so BDAT sends the same message. A copy: the
		// bytes after data's end are the caller's (the next mail of a
		// batch packed in one buffer).
		data = append(data[:len(data):len(data)], '\r', '\n')
	}
	if !pc.pipelining {
		for _, cmd := range []string{mail, rcpt} {
			t.line(cmd)
			if err := t.exchange(step{name: cmd[:4], want: 2}); err != nil {
				return t.reset(err)
			}
		}
		return t.body(data)
	}
	t.line(mail)
	t.line(rcpt)
	if pc.chunking {
		t.bdat(data)
		return t.reset(t.exchange(step{"MAIL", 2}, step{"RCPT", 2}, step{"BDAT", 2}))
	}
	t.line("DATA")
	err := t.exchange(step{"MAIL", 2}, step{"RCPT", 2}, step{"DATA", 354})
	if err == nil {
		t.stuffed(data)
		return t.reset(t.exchange(step{"end of data", 2}))
	}
	if t.dataOpen {
		// The server took DATA though it refused before: end the empty
		// message so that the connection is back in step.
		t.line(".")
		var te *transportError
		if ferr := t.exchange(step{"end of data", 2}); errors.As(ferr, &te) {
			return ferr
		}
	}
	return t.reset(err)
}

// txn is a transaction in progress: the bytes to write next, and what came
// back so far.
type txn struct {
	pc       *pooledConn
	replied  bool
	dataOpen bool // DATA answered 354
	// last is the text of the last reply read (without its code).
	last string
}

func (t *txn) line(cmd string) {
	t.pc.out = append(append(t.pc.out, cmd...), '\r', '\n')
}

// bdat queues the message as one BDAT chunk, the last.
func (t *txn) bdat(data []byte) {
	t.pc.out = append(t.pc.out, "BDAT "...)
	t.pc.out = strconv.AppendInt(t.pc.out, int64(len(data)), 10)
	t.pc.out = append(t.pc.out, " LAST\r\n"...)
	t.pc.out = append(t.pc.out, data...)
}

// stuffed queues the message for DATA: a dot that starts a line is
// doubled, and a line with a dot ends it.
func (t *txn) stuffed(data []byte) {
	out := t.pc.out
	if len(data) > 0 && data[0] == '.' {
		out = append(out, '.')
	}
	for {
		i := bytes.Index(data, []byte("\n."))
		if i < 0 {
			break
		}
		out = append(out, data[:i+2]...)
		out = append(out, '.')
		data = data[i+2:]
	}
	out = append(out, data...)
	t.pc.out = append(out, ".\r\n"...)
}

// body sends the message without pipelining: BDAT where the server
// offers CHUNKING, else DATA and the message after its 354.
func (t *txn) body(data []byte) error {
	if t.pc.chunking {
		t.bdat(data)
		return t.reset(t.exchange(step{"BDAT", 2}))
	}
	t.line("DATA")
	if err := t.exchange(step{"DATA", 354}); err != nil {
		return t.reset(err)
	}
	t.stuffed(data)
	return t.reset(t.exchange(step{"end of data", 2}))
}

// exchange writes what is queued in one write and reads a reply for each
// step, in order. It returns the first refusal (a *replyError) once every
// reply is read, or a *transportError at once.
func (t *txn) exchange(steps ...step) error {
	w := t.pc.c.Text.W
	_, err := w.Write(t.pc.out)
	if err == nil {
		err = w.Flush()
	}
	t.pc.out = t.pc.out[:0]
	if err != nil {
		return &transportError{step: steps[0].name, replied: t.replied, err: err}
	}
	var refused error
	for _, st := range steps {
		code, msg, err := t.pc.c.Text.ReadResponse(0)
		if err != nil {
			return &transportError{step: st.name, replied: t.replied, err: err}
		}
		t.replied, t.last = true, msg
		ok := code == st.want || st.want < 10 && code/100 == st.want
		if st.want == 354 && code == 354 {
			t.dataOpen = true
		}
		if !ok && refused == nil {
			refused = &replyError{step: st.name, code: code, msg: msg, broken: code == 421}
		}
	}
	return refused
}

// reset returns err; after a refusal it resets the transaction with RSET,
// so the connection can carry the next mail, or marks it broken.
func (t *txn) reset(err error) error {
	var re *replyError
	if !errors.As(err, &re) || re.broken {
		return err
	}
	t.line("RSET")
	if rerr := t.exchange(step{"RSET", 2}); rerr != nil {
		re.broken = true
	}
	return err
}

// valid refuses an address that would break the command line.
func (env envelope) valid() error {
	for _, a := range []string{env.from, env.to} {
		if a == "" || strings.ContainsAny(a, "\r\n<>") {
			return fmt.Errorf("envelope address %q", a)
		}
	}
	return nil
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
