package bench

import (
	"bytes"
	"io"
	"net"
	"net/smtp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// Sink is a fast loopback SMTP server that accepts and discards every mail,
// counting them: the far end of the sending benchmarks.
type Sink struct {
	Addr     string
	accepted atomic.Int64
	bytes    atomic.Int64
	srv      *gosmtp.Server
	front    net.Listener // a plain sink's proxy (StartPlainSink); nil otherwise

	mu     sync.Mutex
	sample []byte
}

// StartSink listens on a free loopback port.
func StartSink() (*Sink, error) { return StartSinkAt("127.0.0.1:0") }

// StartSinkAt listens on addr: for a benchmark confined to a port range
// of its own (bench-scale), which a port picked by the kernel may fall
// outside of.
func StartSinkAt(addr string) (*Sink, error) {
	s := &Sink{}
	s.srv = gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return sinkSession{s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.Addr = l.Addr().String()
	go func() { _ = s.srv.Serve(l) }() // returns when Close stops it
	return s, nil
}

// Accepted is how many mails the sink took.
func (s *Sink) Accepted() int64 { return s.accepted.Load() }

// Bytes is how many message bytes (after DATA) the sink took.
func (s *Sink) Bytes() int64 { return s.bytes.Load() }

// Close stops the sink.
func (s *Sink) Close() {
	if s.front != nil {
		Warn("close the plain sink's proxy", s.front.Close())
	}
	Warn("close sink", s.srv.Close())
}

type sinkSession struct{ s *Sink }

func (sinkSession) Reset()                                 {}
func (sinkSession) Logout() error                          { return nil }
func (sinkSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (x sinkSession) Data(r io.Reader) error {
	if x.s.accepted.Load()%1024 == 0 {
		// Keep a mail now and then (the DKIM measurement signs one).
		var b bytes.Buffer
		n, err := io.Copy(&b, r)
		if err != nil {
			return err
		}
		x.s.mu.Lock()
		x.s.sample = b.Bytes()
		x.s.mu.Unlock()
		x.s.bytes.Add(n)
		x.s.accepted.Add(1)
		return nil
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return err
	}
	x.s.bytes.Add(n)
	x.s.accepted.Add(1)
	return nil
}

// Sample is a recent mail the sink took, as it arrived.
func (s *Sink) Sample() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sample
}

// Body4K is about 4 KB of text, the size of a typical digest's text part.
var Body4K = strings.Repeat("A line of a newsletter digest, long enough to look like one.\n", 66)

// BareLoop is the baseline of the sending benchmarks: the least a client
// can do per mail (net/smtp, one connection, one mail after another).
func BareLoop(addr, body string, d time.Duration) (Result, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return Result{}, err
	}
	defer func() { Warn("quit bare loop", c.Quit()) }()
	msg := []byte("From: news@example.com\r\nTo: r@example.org\r\nSubject: What is new\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n"))
	var failed error
	res := Load(1, d, func(int64) error {
		if err := c.Mail("news@example.com"); err != nil {
			failed = err
			return err
		}
		if err := c.Rcpt("r@example.org"); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		return w.Close()
	})
	return res, failed
}
