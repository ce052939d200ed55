// Package intake is the bounce intake: an SMTP server for the bounce
// address that reads delivery-status and abuse reports (package feedback)
// and hands its Consumer (the process's, which queues a feedback task)
// an event for the subscriber a report names by a VERP tag. It answers
// 250 to anything it read, used or not (a report it cannot use is logged
// and counted, never bounced back, which would loop), 5xx to other
// recipients and oversized mail, and 451 when the Consumer cannot take
// the events, so the sending MTA keeps the report and tries again:
// nothing is lost.
//
// Anyone can reach the bounce MX, so the intake believes only what it can
// check: a report counts when a tag this service made (a MAC over the
// subscriber id and mail kind) names the subscriber, in the address the
// report was sent to or in the original's Return-Path or Message-ID that it
// quotes. A report without one, or whose tags do not verify, changes
// nothing and is counted as unverified; the address a report states is
// never used. One report queues at most one event per subscriber, reads
// at most feedback.MaxRecipientBlocks recipients, and the sessions are
// capped in number and length (sessions.go).
package intake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/address"
)

// DefaultMaxSize bounds one report mail. Reports quote at most the
// original's headers or the original itself; ours are small.
const DefaultMaxSize = 1 << 20

// Config configures the intake.
type Config struct {
	// BounceAddress is the only recipient accepted, bare or with a VERP
	// tag (bounces@b.example.com, bounces+<tag>@b.example.com).
	BounceAddress string
	// Domain is the name in the greeting.
	Domain string
	// Tagger verifies the tags; without one no report verifies.
	Tagger *feedback.Tagger
	// Consumer takes each verified event; its error is answered 451.
	Consumer feedback.Consumer
	MaxSize  int64 // DefaultMaxSize
	// Session limits (sessions.go); zero: the defaults.
	MaxSessions          int           // DefaultMaxSessions
	MaxSessionsPerClient int           // DefaultMaxSessionsPerClient
	IdleTimeout          time.Duration // DefaultIdleTimeout
	SessionTimeout       time.Duration // DefaultSessionTimeout
	Metrics              *Metrics
	Log                  *slog.Logger
}

// Metrics count what the intake read.
type Metrics struct {
	// Reports counts report mails by result: queued (an event enqueued),
	// unverified (a report that names nobody by a tag that verifies: it
	// changed nothing), none (a report with no failure in it, such as a
	// delay), not_report, malformed.
	Reports *prometheus.CounterVec
	// SessionsRefused counts connections answered 421 at once, by reason:
	// max_sessions, per_client.
	SessionsRefused *prometheus.CounterVec
	// Sessions is the number of sessions open.
	Sessions prometheus.Gauge
}

// Results are the values of the result label.
var Results = []string{"queued", "unverified", "none", "not_report", "malformed"}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_bounce_reports_total",
			Help: "Mails received by the bounce intake, by result (queued, unverified, none, not_report, malformed).",
		}, []string{"result"}),
		SessionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_bounce_sessions_refused_total",
			Help: "Connections to the bounce intake answered 421 because a session cap was reached, by reason (max_sessions, per_client).",
		}, []string{"reason"}),
		Sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "newsletter_bounce_sessions_open",
			Help: "SMTP sessions open on the bounce intake.",
		}),
	}
	for _, r := range Results {
		m.Reports.WithLabelValues(r)
	}
	for _, r := range []string{"max_sessions", "per_client"} {
		m.SessionsRefused.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Reports, m.SessionsRefused, m.Sessions)
	}
	return m
}

// Server is the intake's SMTP server.
type Server struct {
	cfg   Config
	smtp  *smtp.Server
	local string // the bounce address's local part
	dom   string // and domain
}

// New builds the server; Serve runs it.
func New(cfg Config) (*Server, error) {
	at := strings.LastIndexByte(cfg.BounceAddress, '@')
	if at <= 0 {
		return nil, errors.New("intake: a bounce address is required")
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxSessionsPerClient <= 0 {
		cfg.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, local: strings.ToLower(cfg.BounceAddress[:at]), dom: strings.ToLower(cfg.BounceAddress[at+1:])}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		conn, _ := c.Conn().(*sessionConn) // always, through Serve's listener
		return &session{s: s, conn: conn}, nil
	}))
	srv.Domain = cfg.Domain
	if srv.Domain == "" {
		srv.Domain = s.dom
	}
	srv.MaxMessageBytes = cfg.MaxSize
	srv.MaxRecipients = 10
	// Per command; the session's own limits (sessionConn) bound it too.
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	srv.ErrorLog = slogPrinter{cfg.Log}
	s.smtp = srv
	return s, nil
}

// Serve accepts connections on l until Close, within the session caps.
func (s *Server) Serve(l net.Listener) error {
	m := s.cfg.Metrics
	err := s.smtp.Serve(&sessionListener{
		Listener: l, max: s.cfg.MaxSessions, perClient: s.cfg.MaxSessionsPerClient,
		idle: s.cfg.IdleTimeout, life: s.cfg.SessionTimeout, byClient: map[string]int{},
		refused: func(reason string) { m.SessionsRefused.WithLabelValues(reason).Inc() },
		opened:  func(delta int) { m.Sessions.Add(float64(delta)) },
	})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the server.
func (s *Server) Close() error { return s.smtp.Close() }

// Shutdown stops accepting and waits for open sessions until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.smtp.Shutdown(ctx) }

// tagOf tells whether rcpt is the bounce address, and its VERP tag.
func (s *Server) tagOf(rcpt string) (tag string, ok bool) {
	rcpt = strings.ToLower(strings.Trim(strings.TrimSpace(rcpt), "<>"))
	at := strings.LastIndexByte(rcpt, '@')
	if at <= 0 || rcpt[at+1:] != s.dom {
		return "", false
	}
	local := rcpt[:at]
	if local == s.local {
		return "", true
	}
	if strings.HasPrefix(local, s.local+"+") {
		return local[len(s.local)+1:], true
	}
	return "", false
}

func (s *Server) count(result string) { s.cfg.Metrics.Reports.WithLabelValues(result).Inc() }

type session struct {
	s    *Server
	conn *sessionConn // nil only when go-smtp is served another way
	tags []string
}

// progress is a step of the mail transaction: the session is not idle.
func (x *session) progress() {
	if x.conn != nil {
		x.conn.touch()
	}
}

func (x *session) Mail(string, *smtp.MailOptions) error { x.progress(); return nil }

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.progress()
	tag, ok := x.s.tagOf(to)
	if !ok {
		// Unwrapped, or go-smtp loses the code.
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such recipient here: this server takes bounces only"}
	}
	x.tags = append(x.tags, tag)
	return nil
}

func (x *session) Data(r io.Reader) error {
	x.progress()
	raw, err := io.ReadAll(progressReader{r, x})
	if err != nil {
		return err // too large: go-smtp answers 552 itself
	}
	log := x.s.cfg.Log
	reports, err := feedback.ParseReport(bytes.NewReader(raw))
	switch {
	case errors.Is(err, feedback.ErrNotAReport):
		log.Info("bounce intake: not a report, dropped", "err", err.Error())
		x.s.count("not_report")
		return nil
	case err != nil:
		log.Warn("bounce intake: malformed report, dropped", "err", err.Error())
		x.s.count("malformed")
		return nil
	case len(reports) == 0:
		x.s.count("none")
		return nil
	}
	queued, unverified := 0, 0
	done := map[int64]bool{} // one event per subscriber and report
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rep := range reports {
		p, err := feedback.FromReport(rep, x.tags, x.s.cfg.Tagger)
		if errors.Is(err, feedback.ErrTestMail) {
			log.Info("bounce intake: a report about a test send, ignored", "type", rep.Type)
			continue
		}
		if err != nil {
			unverified++
			log.Warn("bounce intake: unverified report ignored", "why", err.Error(), "type", rep.Type, "domain", address.Domain(rep.Recipient))
			continue
		}
		if done[p.SubscriberID] {
			continue // another recipient block about the same mail
		}
		done[p.SubscriberID] = true
		if err := x.s.cfg.Consumer.Consume(ctx, p); err != nil {
			log.Error("bounce intake: could not queue the report; the sender will try again", "err", err)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot take the report just now, try again later"}
		}
		queued++
		log.Info("bounce intake: report queued", "type", p.Type, "subscriber", p.SubscriberID, "kind", p.Kind, "status", rep.Status)
	}
	if queued > 0 {
		x.s.count("queued")
	} else if unverified > 0 {
		x.s.count("unverified")
	}
	return nil
}

// progressReader keeps a session that is sending a report from counting as
// idle.
type progressReader struct {
	r io.Reader
	x *session
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.x.progress()
	}
	return n, err
}

// slogPrinter is go-smtp's error log (a connection that failed, such as
// one cut at its session limit) as debug lines of the service's log,
// rather than go-smtp's own lines on stderr.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) {
	p.log.Debug("bounce intake: " + fmt.Sprintf(format, v...))
}
func (p slogPrinter) Println(v ...any) { p.log.Debug("bounce intake: " + fmt.Sprint(v...)) }

func (x *session) Reset()        { x.tags = nil }
func (x *session) Logout() error { return nil }
