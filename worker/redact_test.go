package worker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestFailedMailLogsNoNameOrAddress: a mail that cannot be built (a name
// no To header can carry, stored before names were checked) fails for
// good on a real worker, and neither the lines it logs (through the
// redactor, as the binary wires it: the task line with its ID, asynq's
// own lines) nor the task's last error show the name or any part of the
// address's local part.
func TestFailedMailLogsNoNameOrAddress(t *testing.T) {
	d := newDelivery(t)
	cfg, err := email.ParseServerURL(d.smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewSMTPMailer(mailer.ComposeOptions{From: "News <news@example.com>"}, email.SMTPOptions{Server: cfg, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	var out logtest.Buffer
	log := slog.New(logredact.New([]byte("0123456789abcdef")).Handler(slog.NewTextHandler(&out, nil)))
	h := NewHandlers(Deps{Store: d.store, Mailer: m, Render: render, Log: log, Metrics: d.metrics, Links: newHandlersLinks()})
	w := New(d.rdb, Config{Concurrency: 2, ShutdownTimeout: 5 * time.Second, Log: log, PollInterval: 20 * time.Millisecond}, h)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(); _ = m.Close() })

	const email, name = "john.smith=work@example.org", "Zoë\x00Quinn-Marlowe"
	ctx := context.Background()
	job := tasks.NewWelcome(email, time.Now(), 0)
	if _, err := d.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Name: name, Activate: true, Outbox: job.Outbox()}); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Dispatch(ctx, d.client, d.store, job); err != nil {
		t.Fatal(err)
	}
	info := d.waitArchived(t, email)
	if len(d.smtp.Messages()) != 0 {
		t.Fatal("the mail went out")
	}
	logged := out.String()
	if !strings.Contains(logged, "result=archived") || !strings.Contains(logged, "id=welcome:example.org#") {
		t.Fatalf("no line about the failed task and its recipient:\n%s", logged)
	}
	for _, leak := range []string{"Zo", "Quinn", "Marlowe", "john", "smith", "work@", "=work"} {
		if strings.Contains(logged, leak) || strings.Contains(info.LastErr, leak) {
			t.Fatalf("%q reached the log or the task's error:\n%s\nlast error: %s", leak, logged, info.LastErr)
		}
	}
}
