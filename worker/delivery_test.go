package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// delivery is a worker on a real Redis sending over SMTP to a scripted
// server: the path a mail takes in production.
type delivery struct {
	rdb     *redis.Client
	store   *store.Redis
	smtp    *smtptest.Server
	client  *asynq.Client
	insp    *asynq.Inspector
	metrics *Metrics

	mu     sync.Mutex
	delays map[string][]time.Duration // task id -> delays asked for

	// notify and post, when set, are the worker's webhook notifier and
	// poster (webhooks_test.go).
	notify *webhooks.Notifier
	post   WebhookPoster
	hooks  tasks.WebhookBackoff

	// now and zone, when set, are the worker's clock and the time zone
	// of readers without one (issue_localtime_test.go).
	now  func() time.Time
	zone *time.Location
	// push, when set, is the worker's web push sender (fanout_test.go).
	push webpush.Sender
	// channels, when set, are the channels added through the seam
	// (channellane_test.go).
	channels []channels.Channel
}

func newDelivery(t *testing.T) *delivery {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBWorker)
	d := &delivery{
		rdb: rdb, store: store.NewRedis(rdb), smtp: smtptest.Start(t),
		client: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb),
		metrics: NewMetrics(nil), delays: map[string][]time.Duration{},
	}
	return d
}

// startWorker runs one worker process's worth: its own SMTP pool, its own
// limiter instance on the shared Redis. It returns its stop (a worker
// gone as a killed one is, for the tests that start another); the test's
// end stops it too, once.
func (d *delivery) startWorker(t *testing.T, sendRate, concurrency int, opts ...func(*Config)) (stop func()) {
	t.Helper()
	cfg, _ := email.ParseServerURL(d.smtp.URL())
	m, err := NewSMTPMailer(mailer.ComposeOptions{From: "News <news@example.com>"}, email.SMTPOptions{Server: cfg, PoolSize: concurrency, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	render, _ := mailer.NewRenderer("")
	h := NewHandlers(Deps{
		Store: d.store, Mailer: m, Render: render, Log: discard, Metrics: d.metrics,
		Links:    newHandlersLinks(),
		Pace:     pace.New(d.rdb, sendRate),
		Throttle: 50 * time.Millisecond,
		Queue:    d.client, Depth: RedisQueueDepth{Redis: d.rdb}, DigestBatch: 50, MarkWindow: concurrency,
		Notify: d.notify, WebhookPost: d.post, WebhookBackoff: d.hooks,
		Now: d.now, DefaultZone: d.zone,
		Push: d.push, PushRetry: RetryPolicy{Base: 20 * time.Millisecond, Max: time.Second},
		Channels: d.channels, ChannelRetry: RetryPolicy{Base: 20 * time.Millisecond, Max: time.Second},
	})
	policy := RetryPolicy{Base: 20 * time.Millisecond, Throttled: 200 * time.Millisecond, Max: time.Second}
	wc := Config{
		Concurrency: concurrency, ShutdownTimeout: 5 * time.Second, Log: discard, PollInterval: 20 * time.Millisecond,
		RetryDelay: func(n int, err error, task *asynq.Task) time.Duration {
			delay := policy.Delay(n, err, task)
			p, _ := tasks.WelcomeEmail.Decode(task.Payload()) // only welcome tasks are recorded by address
			d.mu.Lock()
			d.delays[p.Email] = append(d.delays[p.Email], delay)
			d.mu.Unlock()
			return delay
		},
		GroupGrace: time.Second, GroupMaxDelay: 10 * time.Second, GroupMaxSize: 100,
	}
	for _, o := range opts {
		o(&wc)
	}
	w := New(d.rdb, wc, h)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { w.Shutdown(); m.Close() }) }
	t.Cleanup(stop)
	return stop
}

func (d *delivery) welcome(t *testing.T, emails ...string) {
	t.Helper()
	ctx := context.Background()
	for _, e := range emails {
		job := tasks.NewWelcome(e, time.Now(), 0)
		if _, err := d.store.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, Outbox: job.Outbox()}); err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.Dispatch(ctx, d.client, d.store, job); err != nil {
			t.Fatal(err)
		}
	}
}

func (d *delivery) waitArchived(t *testing.T, email string) *asynq.TaskInfo {
	t.Helper()
	var info *asynq.TaskInfo
	poll.True(t, poll.BusyMachine, "task archived", func() bool {
		var err error
		info, err = d.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID(email))
		return err == nil && info.State == asynq.TaskStateArchived
	})
	return info
}

func reply(code int, enh smtp.EnhancedCode, msg string) *smtptest.Fault {
	return &smtptest.Fault{Err: &smtp.SMTPError{Code: code, EnhancedCode: enh, Message: msg}}
}

func TestGreylistedTwiceThenDelivered(t *testing.T) {
	d := newDelivery(t)
	d.smtp.SetScript(func(rcpt string, attempt int) *smtptest.Fault {
		if attempt <= 2 {
			return reply(451, smtp.EnhancedCode{4, 7, 1}, "greylisted, try again later")
		}
		return nil
	})
	d.startWorker(t, 1000, 2)
	d.welcome(t, "grey@x.org")
	d.smtp.WaitFor(t, 1, poll.BusyMachine)
	if n := len(d.smtp.To("grey@x.org")); n != 1 || d.smtp.Attempts("grey@x.org") != 3 {
		t.Fatalf("%d delivered after %d attempts; want 1 after 3", n, d.smtp.Attempts("grey@x.org"))
	}
	d.mu.Lock()
	delays := d.delays["grey@x.org"]
	d.mu.Unlock()
	if len(delays) != 2 || delays[1] < delays[0] || delays[0] < 100*time.Millisecond {
		t.Fatalf("retry delays %v: want two, growing, on the longer throttled scale", delays)
	}
	if got := testutil.ToFloat64(d.metrics.Failed.WithLabelValues("welcome", "throttled")); got != 2 {
		t.Fatalf("failed{throttled} = %v, want 2", got)
	}
	// The worker counts the mail after the server's 250, so the count may
	// trail what the server saw: poll for it.
	poll.Until(t, poll.BusyMachine, func() error {
		if got := testutil.ToFloat64(d.metrics.Sent.WithLabelValues("welcome")); got != 1 {
			return fmt.Errorf("sent = %v, want 1", got)
		}
		return nil
	})
}

func TestHardBounceSuppressesTheAddress(t *testing.T) {
	d := newDelivery(t)
	d.smtp.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		if rcpt == "gone@x.org" {
			return reply(550, smtp.EnhancedCode{5, 1, 1}, "no such user")
		}
		return nil
	})
	d.startWorker(t, 1000, 2)
	d.welcome(t, "gone@x.org")
	info := d.waitArchived(t, "gone@x.org")
	if info.Retried != 0 || d.smtp.Attempts("gone@x.org") != 1 {
		t.Fatalf("a hard bounce was retried: %d retries, %d attempts", info.Retried, d.smtp.Attempts("gone@x.org"))
	}
	sub, _ := d.store.Get(context.Background(), "gone@x.org")
	if sub.Status != store.Bounced {
		t.Fatalf("status %s, want bounced", sub.Status)
	}
	// The active bitmap of the subscriber's shard (store/keys.go's
	// sfxActive, bit id/Shards) is what every audience walk reads.
	key := fmt.Sprintf("nl:{s%02d}:act", sub.ID%store.Shards)
	if bit, err := d.rdb.GetBit(context.Background(), key, sub.ID/store.Shards).Result(); err != nil || bit != 0 {
		t.Fatalf("a bounced subscriber is still in the active bitmap the audience walks read (bit %d, %v)", bit, err)
	}
	if got := testutil.ToFloat64(d.metrics.Failed.WithLabelValues("welcome", "bounced")); got != 1 {
		t.Fatalf("failed{bounced} = %v", got)
	}
}

// A receiver's 550 5.1.1 while an issue is sent is a bounce report like
// one that arrives later: the one recorder puts it in the person's history
// (the console's page and the data export read the same log), counts it
// against the issue's bounces, and counts it once in the metrics.
func TestHardBounceAtSendingOfAnIssueIsRecorded(t *testing.T) {
	d := newDelivery(t)
	readers := seed(t, d.store, "r", 3)
	gone := readers[1]
	d.smtp.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		if rcpt == gone {
			return reply(550, smtp.EnhancedCode{5, 1, 1}, "no such user")
		}
		return nil
	})
	d.startWorker(t, 1000, 2)
	is := d.sendIssue(t, store.IssueContent{Subject: "Bounces", Body: "Hello", Topics: []string{topics.Digest}})
	if p := d.waitIssueSent(t, is.ID); p.Bounces != 1 || p.Sent != 2 {
		t.Fatalf("issue progress %+v: want 2 sent and 1 bounce", p)
	}
	data, err := d.store.PersonalData(context.Background(), gone)
	if err != nil {
		t.Fatal(err)
	}
	if data.Subscriber.Status != store.Bounced || !data.Suppressed ||
		len(data.Feedback) != 1 || data.Feedback[0].Type != store.HardBounce || data.Feedback[0].At.IsZero() {
		t.Fatalf("export of the bounced reader: status %s, suppressed %v, feedback %+v", data.Subscriber.Status, data.Suppressed, data.Feedback)
	}
	if got := testutil.ToFloat64(d.metrics.Bounces.WithLabelValues("hard", "smtp")); got != 1 {
		t.Fatalf("bounces{hard,smtp} = %v, want 1", got)
	}
}

func TestPolicyRejectionKeepsTheAddress(t *testing.T) {
	d := newDelivery(t)
	d.smtp.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		return &smtptest.Fault{AtData: true, Err: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "message refused by policy"}}
	})
	d.startWorker(t, 1000, 2)
	d.welcome(t, "policy@x.org")
	info := d.waitArchived(t, "policy@x.org")
	if info.Retried != 0 {
		t.Fatalf("a policy rejection was retried %d times", info.Retried)
	}
	if sub, _ := d.store.Get(context.Background(), "policy@x.org"); sub.Status != store.Active {
		t.Fatalf("the address was suppressed for our own fault: %s", sub.Status)
	}
	if got := testutil.ToFloat64(d.metrics.Failed.WithLabelValues("welcome", "rejected")); got != 1 {
		t.Fatalf("failed{rejected} = %v", got)
	}
}

func TestConnectionDroppedMidDataIsRetriedOnce(t *testing.T) {
	d := newDelivery(t)
	d.smtp.SetScript(func(_ string, attempt int) *smtptest.Fault {
		if attempt == 1 {
			return &smtptest.Fault{Drop: true}
		}
		return nil
	})
	d.startWorker(t, 1000, 2)
	d.welcome(t, "drop@x.org")
	d.smtp.WaitFor(t, 1, poll.BusyMachine)
	// Give a wrong second delivery every chance to show up: the task must
	// be completed, not pending another retry.
	poll.True(t, poll.BusyMachine, "task done", func() bool {
		_, err := d.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("drop@x.org"))
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	if n := len(d.smtp.To("drop@x.org")); n != 1 || d.smtp.Attempts("drop@x.org") != 2 {
		t.Fatalf("%d delivered after %d attempts; want exactly 1 after 2", n, d.smtp.Attempts("drop@x.org"))
	}
}

func TestExhaustedRetriesAreArchivedAndRerunnable(t *testing.T) {
	d := newDelivery(t)
	var mu sync.Mutex
	down := true
	d.smtp.SetScript(func(string, int) *smtptest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return reply(451, smtp.EnhancedCode{4, 3, 0}, "local error")
		}
		return nil
	})
	d.startWorker(t, 1000, 2)
	d.welcome(t, "later@x.org")
	info := d.waitArchived(t, "later@x.org")
	if info.Retried != 5 || d.smtp.Attempts("later@x.org") != 6 {
		t.Fatalf("archived after %d retries / %d attempts, want 5 / 6", info.Retried, d.smtp.Attempts("later@x.org"))
	}
	mu.Lock()
	down = false
	mu.Unlock()
	// What an operator does from asynqmon's archive tab.
	if err := d.insp.RunTask(tasks.QueueDefault, info.ID); err != nil {
		t.Fatal(err)
	}
	d.smtp.WaitFor(t, 1, poll.BusyMachine)
}

// TestSharedRateAcrossWorkers runs three worker "processes" (three asynq
// servers, three SMTP pools, three limiter instances) on one Redis: together
// they get the configured rate, not three times it.
//
// The check is GCRA's own guarantee, read on the limiter's clock (Redis
// TIME): n sends granted between t0 and t1 from one shared budget need
// t1-t0 >= (n-burst)/rate. Three budgets would each grant a third of the
// mails and finish in a third of that on an idle machine. A busy machine
// only makes the run longer, so this never fails for a slow machine, unlike
// timing the mails where they arrive (a starved SMTP server bunches them).
func TestSharedRateAcrossWorkers(t *testing.T) {
	const rate, mails = 20, 80
	const burst = max(1, rate/10) // pace.New's burst
	d := newDelivery(t)
	for i := 0; i < 3; i++ {
		d.startWorker(t, rate, 4)
	}
	emails := make([]string, mails)
	for i := range emails {
		emails[i] = fmt.Sprintf("r%02d@x.org", i)
	}
	ctx := context.Background()
	t0, err := d.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	d.welcome(t, emails...)
	d.smtp.WaitFor(t, mails, poll.BusyMachine)
	t1, err := d.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	need := time.Duration(float64(mails-burst) / rate * float64(time.Second))
	t.Logf("%d mails granted in %s of Redis time; one shared budget needs at least %s", mails, t1.Sub(t0).Round(time.Millisecond), need)
	if t1.Sub(t0) < need {
		t.Fatalf("three workers sent %d mails in %s; a shared %d/s budget needs at least %s", mails, t1.Sub(t0), rate, need)
	}
	for _, e := range emails {
		if n := len(d.smtp.To(e)); n != 1 {
			t.Fatalf("%s got %d mails", e, n)
		}
	}
}
