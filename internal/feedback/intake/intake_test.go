package intake

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/smtp"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/feedback"
)

// queue records what the intake enqueues, or fails like a Redis that is
// away.
type queue struct {
	mu    sync.Mutex
	tasks []*asynq.Task
	fail  bool
}

func (q *queue) EnqueueContext(_ context.Context, t *asynq.Task, _ ...asynq.Option) (*asynq.TaskInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	q.tasks = append(q.tasks, t)
	return &asynq.TaskInfo{}, nil
}

func (q *queue) count() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.tasks) }

func start(t *testing.T, q *queue) (string, *Metrics) {
	t.Helper()
	m := NewMetrics(nil)
	srv, err := New(Config{
		BounceAddress: "bounces@b.example.com", Tagger: feedback.NewTagger([]byte("0123456789abcdef")),
		Queue: q, MaxSize: 8 << 10, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
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

func dsn(t *testing.T) string {
	b, err := os.ReadFile("../testdata/dsn.eml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.ReplaceAll(string(b), "TAG", "2n9c-d-000000000000"), "\n", "\r\n")
}

// TestIntakeCountsWhatItCannotUse: reports with unknown tags still map by
// address; junk and plain mail are accepted (250, never bounced back) and
// counted; other recipients and oversized mail are refused; a queue that
// is away makes a 451, so the sender keeps the report.
func TestIntakeCountsWhatItCannotUse(t *testing.T) {
	q := &queue{}
	addr, m := start(t, q)
	send := func(rcpt, body string) error { return smtp.SendMail(addr, nil, "", []string{rcpt}, []byte(body)) }

	// A forged tag (wrong MAC) is not trusted: the report maps by its
	// recipients' addresses instead.
	if err := send("bounces+2n9c-d-000000000000@b.example.com", dsn(t)); err != nil {
		t.Fatal(err)
	}
	if q.count() != 2 || testutil.ToFloat64(m.Reports.WithLabelValues("queued")) != 1 {
		t.Fatalf("DSN with two failures: %d tasks", q.count())
	}
	for _, p := range q.tasks {
		if !strings.Contains(string(p.Payload()), `"email":"`) || strings.Contains(string(p.Payload()), "subscriber_id") {
			t.Fatalf("a forged tag was trusted: %s", p.Payload())
		}
	}
	for name, body := range map[string]string{
		"plain mail": "Subject: out of office\r\n\r\nI am away.\r\n",
		"malformed":  "Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822; x@example.org\r\n",
	} {
		if err := send("bounces@b.example.com", body); err != nil {
			t.Fatalf("%s: %v (must be accepted, never bounced back)", name, err)
		}
	}
	if testutil.ToFloat64(m.Reports.WithLabelValues("not_report")) != 1 || testutil.ToFloat64(m.Reports.WithLabelValues("malformed")) != 1 || q.count() != 2 {
		t.Fatalf("junk: not_report %v, malformed %v, %d tasks", testutil.ToFloat64(m.Reports.WithLabelValues("not_report")),
			testutil.ToFloat64(m.Reports.WithLabelValues("malformed")), q.count())
	}
	if err := send("postmaster@b.example.com", dsn(t)); err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("another recipient: %v", err)
	}
	if err := send("bounces@b.example.com", dsn(t)+strings.Repeat(strings.Repeat("x", 70)+"\r\n", 300)); err == nil || !strings.Contains(err.Error(), "552") {
		t.Fatalf("oversized: %v", err)
	}
	q.mu.Lock()
	q.fail = true
	q.mu.Unlock()
	if err := send("bounces@b.example.com", dsn(t)); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("queue away: %v, want 451", err)
	}
}
