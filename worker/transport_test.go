package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/sestest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// sesMailer is the SES transport against srv, holding mail for pause
// after a pause answer.
func sesMailer(t *testing.T, srv *sestest.Server, pause time.Duration) mailer.Mailer {
	t.Helper()
	ses, err := email.NewSES(context.Background(), email.SESOptions{
		Region: srv.Region, Endpoint: srv.URL(), MaxBackoff: time.Millisecond, PauseFor: pause,
		Credentials: credentials.NewStaticCredentialsProvider(sestest.AccessKeyID, sestest.SecretAccessKey, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewEmail(mailer.ComposeOptions{From: "News <news@example.com>"}, nil, ses)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// countingMailer counts the sends the deliverer starts.
type countingMailer struct {
	mailer.Mailer
	n atomic.Int32
}

func (c *countingMailer) Send(ctx context.Context, msg *mailer.Message) error {
	c.n.Add(1)
	return c.Mailer.Send(ctx, msg)
}

// pausedOnce answers the first request with SES's sending pause and
// accepts every later one.
func pausedOnce(srv *sestest.Server) {
	first := true
	srv.SetScript(func(string, int) *sestest.Fault {
		if first {
			first = false
			return &sestest.Fault{Code: "SendingPausedException"}
		}
		return nil
	})
}

// TestPausedTransportStopsTheBatch: a pause answer ends a batch at once:
// the other mails are not tried, their claims are handed back, the task
// waits out the pause without counting as failed, and the lane's gauge
// shows the pause until mail goes out again, each mail exactly once.
func TestPausedTransportStopsTheBatch(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBWorker)
	st := store.NewRedis(rdb)
	srv := sestest.Start(t, "us-east-1")
	pausedOnce(srv)
	const pause = 300 * time.Millisecond
	render, _ := mailer.NewRenderer("")
	metrics := NewMetrics(nil)
	counted := &countingMailer{Mailer: sesMailer(t, srv, pause)}
	d := NewHandlers(Deps{Store: st, Mailer: counted, Render: render, Metrics: metrics, Log: discard}).Mails.Deliver
	var mails []Mail
	for i := range 5 {
		email := fmt.Sprintf("p%d@example.org", i)
		mails = append(mails, Mail{
			To:   store.Subscriber{ID: int64(i + 1), Email: email},
			Mark: store.Mark{Kind: mailer.KindDigest, Key: "2026-W49", SubscriberID: int64(i + 1), Shared: true},
			Data: mailer.Data{Email: email, Period: "2026-W49", UnsubscribeURL: "https://news.example.com/u"},
		})
	}
	ctx := context.Background()
	failed, err := d.Deliver(ctx, mails)
	if len(failed) != 0 || email.AsPaused(err) == nil {
		t.Fatalf("failed %v, err %v: want the pause", failed, err)
	}
	requests := 0
	for _, m := range mails {
		requests += srv.Attempts(m.To.Email)
	}
	if requests != 1 || counted.n.Load() != 1 {
		t.Fatalf("%d requests, %d sends: want the one that met the pause", requests, counted.n.Load())
	}
	if IsFailure(err) || taskResult(err, 0, 25) != "deferred" {
		t.Fatalf("a pause counts as a failure: %v", err)
	}
	if got := (RetryPolicy{}).Delay(0, err, nil); got != pause {
		t.Fatalf("retry in %s, want the pause %s", got, pause)
	}
	if g := testutil.ToFloat64(metrics.TransportPaused.WithLabelValues(LaneEmail)); g != 1 {
		t.Fatalf("newsletter_transport_paused = %v during the pause", g)
	}
	if f := testutil.ToFloat64(metrics.Failed.WithLabelValues(mailer.KindDigest, "temporary")); f != 0 {
		t.Fatalf("a held mail counted as failed: %v", f)
	}

	// The retry, once the pause has run out: every mail, once.
	poll.Until(t, 10*time.Second, func() error {
		failed, err := d.Deliver(ctx, mails)
		if len(failed) != 0 {
			t.Fatalf("failed for good: %v", failed)
		}
		return err
	})
	if n := len(srv.Messages()); n != len(mails) {
		t.Fatalf("%d mails went out, want %d", n, len(mails))
	}
	for _, m := range mails {
		if got := len(srv.To(m.To.Email)); got != 1 {
			t.Fatalf("%s got %d mails", m.To.Email, got)
		}
	}
	if g := testutil.ToFloat64(metrics.TransportPaused.WithLabelValues(LaneEmail)); g != 0 {
		t.Fatalf("newsletter_transport_paused = %v after mail went out", g)
	}
}

// TestPausedTransportDefersTasks: through asynq, a task that meets the
// pause is put back (result deferred, not retry), keeps its retry count,
// and sends once the pause is over.
func TestPausedTransportDefersTasks(t *testing.T) {
	d := newDelivery(t)
	srv := sestest.Start(t, "us-east-1")
	pausedOnce(srv)
	render, _ := mailer.NewRenderer("")
	h := NewHandlers(Deps{
		Store: d.store, Mailer: sesMailer(t, srv, 200*time.Millisecond), Render: render, Log: discard, Metrics: d.metrics,
		Links: newHandlersLinks(), Queue: d.client, MarkWindow: 2,
	})
	w := New(d.rdb, Config{Concurrency: 2, ShutdownTimeout: 5 * time.Second, Log: discard, PollInterval: 20 * time.Millisecond}, h)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	d.welcome(t, "held@example.org")
	srv.WaitFor(t, 1, 15*time.Second)
	poll.True(t, 5*time.Second, "task done", func() bool {
		_, err := d.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("held@example.org"))
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	if n, tries := len(srv.To("held@example.org")), srv.Attempts("held@example.org"); n != 1 || tries != 2 {
		t.Fatalf("%d mails after %d requests: want 1 after 2 (the pause answer, the send after it)", n, tries)
	}
	// Held once by SES's answer, maybe again by the transport itself
	// (without a request) until the pause ran out; never a failure.
	if got := testutil.ToFloat64(d.metrics.Tasks.WithLabelValues(tasks.LaneEmail, tasks.TypeWelcomeEmail, tasks.QueueDefault, "deferred")); got < 1 {
		t.Errorf("tasks{result=deferred} = %v, want at least 1", got)
	}
	for result, want := range map[string]float64{"retry": 0, "archived": 0, "success": 1} {
		if got := testutil.ToFloat64(d.metrics.Tasks.WithLabelValues(tasks.LaneEmail, tasks.TypeWelcomeEmail, tasks.QueueDefault, result)); got != want {
			t.Errorf("tasks{result=%s} = %v, want %v", result, got, want)
		}
	}
}
