package bench

import (
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// Sink is a fast loopback SMTP server that accepts and discards every mail,
// counting them: the far end of the sending benchmarks.
type Sink struct {
	Addr     string
	accepted atomic.Int64
	srv      *smtp.Server
}

// StartSink listens on a free loopback port.
func StartSink() (*Sink, error) {
	s := &Sink{}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return sinkSession{s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Addr = l.Addr().String()
	go s.srv.Serve(l)
	return s, nil
}

// Accepted is how many mails the sink took.
func (s *Sink) Accepted() int64 { return s.accepted.Load() }

// Close stops the sink.
func (s *Sink) Close() { s.srv.Close() }

type sinkSession struct{ s *Sink }

func (sinkSession) Reset()                               {}
func (sinkSession) Logout() error                        { return nil }
func (sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (x sinkSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	x.s.accepted.Add(1)
	return nil
}
