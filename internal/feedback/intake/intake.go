// Package intake is the bounce intake: an SMTP server for the bounce
// address that reads delivery-status and abuse reports (package feedback)
// and enqueues one feedback task per event. It answers 250 to anything it
// read, mapped or not (a report it cannot use is logged and counted, never
// bounced back, which would loop), 5xx to other recipients and oversized
// mail, and 451 when the queue cannot take the events, so the sending MTA
// keeps the report and tries again: nothing is lost.
package intake

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/feedback"
	"github.com/newsletter/newsletter/tasks"
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
	Domain  string
	Tagger  *feedback.Tagger
	Queue   tasks.Enqueuer
	MaxSize int64 // DefaultMaxSize
	Metrics *Metrics
	Log     *slog.Logger
}

// Metrics count what the intake read.
type Metrics struct {
	// Reports counts report mails by result: queued (events enqueued),
	// unmatched (a report naming nobody we can find), none (a report with
	// no failure in it, such as a delay), not_report, malformed.
	Reports *prometheus.CounterVec
}

// Results are the values of the result label.
var Results = []string{"queued", "unmatched", "none", "not_report", "malformed"}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{Reports: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsletter_bounce_reports_total",
		Help: "Mails received by the bounce intake, by result (queued, unmatched, none, not_report, malformed).",
	}, []string{"result"})}
	for _, r := range Results {
		m.Reports.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Reports)
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

// New builds the server; Serve or ListenAndServe runs it.
func New(cfg Config) (*Server, error) {
	at := strings.LastIndexByte(cfg.BounceAddress, '@')
	if at <= 0 {
		return nil, errors.New("intake: a bounce address is required")
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, local: strings.ToLower(cfg.BounceAddress[:at]), dom: strings.ToLower(cfg.BounceAddress[at+1:])}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s}, nil
	}))
	srv.Domain = cfg.Domain
	if srv.Domain == "" {
		srv.Domain = s.dom
	}
	srv.MaxMessageBytes = cfg.MaxSize
	srv.MaxRecipients = 10
	srv.ReadTimeout = time.Minute
	srv.WriteTimeout = time.Minute
	s.smtp = srv
	return s, nil
}

// Serve accepts connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	err := s.smtp.Serve(l)
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

func (s *Server) count(result string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Reports.WithLabelValues(result).Inc()
	}
}

type session struct {
	s    *Server
	tags []string
}

func (x *session) Mail(string, *smtp.MailOptions) error { return nil }

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	tag, ok := x.s.tagOf(to)
	if !ok {
		// Unwrapped, or go-smtp loses the code.
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such recipient here: this server takes bounces only"}
	}
	x.tags = append(x.tags, tag)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
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
	envTag := ""
	if len(x.tags) > 0 {
		envTag = x.tags[0]
	}
	queued, unmatched := 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rep := range reports {
		p, ok := feedback.FromReport(rep, envTag, x.s.cfg.Tagger)
		if !ok {
			unmatched++
			log.Info("bounce intake: report names nobody we know", "type", rep.Type, "domain", address.Domain(rep.Recipient))
			continue
		}
		task, err := tasks.NewFeedback(p)
		if err == nil {
			_, err = x.s.cfg.Queue.EnqueueContext(ctx, task)
		}
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) && !errors.Is(err, asynq.ErrDuplicateTask) {
			log.Error("bounce intake: could not queue the report; the sender will try again", "err", err)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot take the report just now, try again later"}
		}
		queued++
		log.Info("bounce intake: report queued", "type", p.Type, "subscriber", p.SubscriberID, "kind", p.Kind, "status", rep.Status)
	}
	if queued > 0 {
		x.s.count("queued")
	} else if unmatched > 0 {
		x.s.count("unmatched")
	}
	return nil
}

func (x *session) Reset()        { x.tags = nil }
func (x *session) Logout() error { return nil }
