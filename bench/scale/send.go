package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/bench"
)

// The send window: an issue to the digest topic's readers, sent the way a
// publisher sends one (`newsletter issue create` and `issue send`) by a
// `newsletter serve` of this tree into the loopback sink, at full speed
// (no send rate, concurrency 16, 16 SMTP connections, as bench-digest's
// worker). The window opens once the sink took WARMUP mails (the planner
// has filled the queue, connections are open) and closes at MAILS mails
// or WINDOW, whichever comes first; the Redis figures are the deltas over
// it divided by the mails the sink took in it. The issue is then
// cancelled through the API and the service stopped: the rest of the list
// is not sent, and need not be, the figure is per mail.

const adminToken = "bench-scale-admin-token-0123"

// sender runs the send windows.
type sender struct {
	bin  string
	sink *bench.Sink
	cfg  config
	addr string // the service's listen address
}

// sendFigures are one window's measurements.
type sendFigures struct {
	mails      int64
	took       time.Duration
	primaryCPU []time.Duration // each primary's CPU in the window
	replicaCPU time.Duration   // the replicas' together
	serviceCPU time.Duration   // the `newsletter serve` process's
	stats      bench.RedisStats
	idle       float64       // the primaries' CPU seconds a second with the service idle
	fanoutTook time.Duration // from the send to the end of the issue's push fan-out
	before     int64         // mails sent before the window opened
}

// idlePerMail is the idle CPU over the window's length, per mail: how
// much of the window's figure the service would have cost anyway.
func (s *sendFigures) idlePerMail() time.Duration {
	return time.Duration(s.idle * float64(s.took) / float64(s.mails))
}

func (s *sendFigures) rate() float64 { return float64(s.mails) / s.took.Seconds() }

func (s *sendFigures) redisSum() time.Duration {
	var sum time.Duration
	for _, c := range s.primaryCPU {
		sum += c
	}
	return sum
}

// perPrimary is each primary's CPU per mail, "a / b / c µs".
func (s *sendFigures) perPrimary() string {
	var out []string
	for _, c := range s.primaryCPU {
		out = append(out, fmt.Sprintf("%.1f", us(c, s.mails)))
	}
	return strings.Join(out, " / ") + " µs"
}

// commands are the Redis commands in the window, less the harness's own
// INFO.
func (s *sendFigures) commands() int64 {
	var n int64
	for name, c := range s.stats.Commands {
		if name != "info" {
			n += c.Calls
		}
	}
	return n
}

// snapshot is the counters a window is measured between.
type snapshot struct {
	at         time.Time
	sent       int64
	primaryCPU []time.Duration
	replicaCPU time.Duration
	serviceCPU time.Duration
	stats      bench.RedisStats
}

func take(ctx context.Context, t *target, pid int, sink *bench.Sink) (snapshot, error) {
	sn := snapshot{stats: bench.RedisStats{Commands: map[string]bench.CommandStat{}}}
	for _, s := range t.primaries {
		c, err := cpuOf(ctx, s)
		if err != nil {
			return sn, err
		}
		sn.primaryCPU = append(sn.primaryCPU, c)
		st, err := bench.ReadRedisStats(ctx, s.rdb)
		if err != nil {
			return sn, err
		}
		sn.stats.Reads += st.Reads
		for name, c := range st.Commands {
			sum := sn.stats.Commands[name]
			sum.Calls, sum.Usec = sum.Calls+c.Calls, sum.Usec+c.Usec
			sn.stats.Commands[name] = sum
		}
	}
	for _, s := range t.replicas {
		c, err := cpuOf(ctx, s)
		if err != nil {
			return sn, err
		}
		sn.replicaCPU += c
	}
	var err error
	if sn.serviceCPU, err = bench.ProcCPU(pid); err != nil {
		return sn, err
	}
	sn.sent, sn.at = sink.Accepted(), time.Now()
	return sn, nil
}

// env is the service's environment on t: this process's, without any
// NEWSLETTER_ setting of the caller's (which could point it at another
// Redis), and the run's.
func (h *sender) env(t *target) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEWSLETTER_") {
			env = append(env, kv)
		}
	}
	env = append(env, t.env...)
	return append(env, "NEWSLETTER_SECRET=benchmark-secret-0123456789", "NEWSLETTER_ADMIN_TOKEN="+adminToken)
}

// measure sends an issue to t's audience readers and measures a window
// of it.
func (h *sender) measure(ctx context.Context, t *target, audience int64) (*sendFigures, error) {
	env := h.env(t)
	dir, err := os.MkdirTemp("", "bench-scale-issue")
	if err != nil {
		return nil, err
	}
	defer func() { warn("remove issue folder", os.RemoveAll(dir)) }()
	md := filepath.Join(dir, "issue.md")
	if err := os.WriteFile(md, []byte(issueMarkdown(20)), 0o644); err != nil {
		return nil, err
	}

	svc := exec.Command(h.bin, "serve")
	stderr := &tail{}
	svc.Env = append(env, "NEWSLETTER_ADDR="+h.addr, "NEWSLETTER_SMTP_URL=smtp://"+h.sink.Addr+"?tls=none",
		"NEWSLETTER_SEND_RATE=1000000", "NEWSLETTER_CONCURRENCY=16", "NEWSLETTER_SMTP_POOL=16", "NEWSLETTER_POLL_INTERVAL=100ms")
	svc.Stderr = stderr
	if err := svc.Start(); err != nil {
		return nil, err
	}
	stopped := false
	stopSvc := func() {
		if !stopped {
			stopped = true
			bench.Stop(svc)
		}
	}
	defer stopSvc()
	if err := bench.WaitHTTP("http://" + h.addr + "/healthz"); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr)
	}

	// What Redis spends with the service connected and idle (asynq's
	// polls, a cluster client's layout reloads, the cluster bus): the
	// floor under the window's figure, which runs for its whole length.
	idle0, err := take(ctx, t, svc.Process.Pid, h.sink)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(h.cfg.idle):
	}
	idle1, err := take(ctx, t, svc.Process.Pid, h.sink)
	if err != nil {
		return nil, err
	}
	var idle time.Duration
	for i := range idle1.primaryCPU {
		idle += idle1.primaryCPU[i] - idle0.primaryCPU[i]
	}
	idleRate := float64(idle) / float64(idle1.at.Sub(idle0.at))

	out, err := h.cli(env, "issue", "create", "--subject", "The scale letter", "--topic", "digest", md)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(out)
	sent0 := h.sink.Accepted()
	exists0, err := existsCalls(ctx, t)
	if err != nil {
		return nil, err
	}
	sendAt := time.Now()
	if _, err := h.cli(env, "issue", "send", id); err != nil {
		return nil, err
	}
	// Whatever happens below, the issue stops: a run that failed half way
	// does not leave the next window's service sending it.
	cancelled := false
	defer func() {
		if !cancelled {
			warn("cancel issue "+id, h.cancel(id))
		}
	}()

	// The issue's push fan-out (the push lane) walks the whole audience
	// once, beside the mails and unpaced by them, asking each reader for
	// a browser (one EXISTS a reader: store.HavePushSubscriptions). A
	// window that caught part of it would charge the mails with a share
	// of a cost that is per reader of the issue, and a different share at
	// every size (it takes longer the larger the list). The window opens
	// once it is done; its own time is reported apart.
	var fanoutErr error
	if err := waitFor(ctx, 30*time.Minute, stderr, func() bool {
		n, err := existsCalls(ctx, t)
		if err != nil {
			fanoutErr = err
			return true
		}
		return n-exists0 >= audience
	}); err != nil {
		return nil, fmt.Errorf("the issue's push fan-out (one EXISTS a reader) did not finish: %w", err)
	}
	if fanoutErr != nil {
		return nil, fanoutErr
	}
	fanoutTook := time.Since(sendAt)
	warm := min(h.cfg.warmup, audience/10)
	if err := waitFor(ctx, 10*time.Minute, stderr, func() bool { return h.sink.Accepted()-sent0 >= warm }); err != nil {
		return nil, fmt.Errorf("warm-up of %d mails: %w", warm, err)
	}
	before, err := take(ctx, t, svc.Process.Pid, h.sink)
	if err != nil {
		return nil, err
	}
	end := min(audience+sent0, before.sent+h.cfg.mails) // the sink's count that closes the window at the latest
	deadline := before.at.Add(h.cfg.window)
	if err := waitFor(ctx, h.cfg.window+10*time.Minute, stderr, func() bool {
		return h.sink.Accepted() >= end || time.Now().After(deadline)
	}); err != nil {
		return nil, err
	}
	after, err := take(ctx, t, svc.Process.Pid, h.sink)
	if err != nil {
		return nil, err
	}
	cancelled = true
	// A window that reached the whole audience may close after the
	// issue finished (a small N): there is nothing left to cancel then.
	if err := h.cancel(id); err != nil && !(errors.Is(err, errIssueOver) && after.sent-sent0 >= audience) {
		return nil, err
	}
	stopSvc()

	f := &sendFigures{mails: after.sent - before.sent, took: after.at.Sub(before.at),
		replicaCPU: after.replicaCPU - before.replicaCPU, serviceCPU: after.serviceCPU - before.serviceCPU,
		stats: after.stats.Since(before.stats), idle: idleRate, fanoutTook: fanoutTook, before: before.sent - sent0}
	for i := range after.primaryCPU {
		f.primaryCPU = append(f.primaryCPU, after.primaryCPU[i]-before.primaryCPU[i])
	}
	if f.mails == 0 {
		return nil, fmt.Errorf("no mail in the window\n%s", stderr)
	}
	return f, nil
}

// existsCalls is how many EXISTS t's primaries have run (INFO
// commandstats): the issue's push fan-out runs one a reader.
func existsCalls(ctx context.Context, t *target) (int64, error) {
	var n int64
	for _, s := range t.primaries {
		st, err := bench.ReadRedisStats(ctx, s.rdb)
		if err != nil {
			return 0, err
		}
		n += st.Commands["exists"].Calls
	}
	return n, nil
}

// waitFor polls done every 50 ms until it holds, ctx ends or limit
// passes; the service's log tail explains a timeout.
func waitFor(ctx context.Context, limit time.Duration, log *tail, done func() bool) error {
	deadline := time.Now().Add(limit)
	for !done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s; the service's log ends:\n%s", limit, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// cli runs a `newsletter` command and returns its output.
func (h *sender) cli(env []string, args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = env
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("newsletter %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return string(out), nil
}

// errIssueOver is a cancel refused because the issue is no longer
// sending (409: sent, or cancelled already).
var errIssueOver = errors.New("the issue is no longer sending")

// cancel cancels issue id through the API, as an editor would.
func (h *sender) cancel(id string) error {
	req, err := http.NewRequest("POST", "http://"+h.addr+"/api/issues/"+id+"/cancel", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	err = errors.Join(err, resp.Body.Close())
	if resp.StatusCode == http.StatusConflict {
		return fmt.Errorf("cancel issue %s: %w: %s", id, errIssueOver, body)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cancel issue %s: %s %s", id, resp.Status, body)
	}
	return err
}

// issueMarkdown is bench-issue's letter: about the 20-item digest's size.
func issueMarkdown(items int) string {
	var b strings.Builder
	b.WriteString("# This week\n\nWhat the benchmark sends, written as a letter.\n\n")
	for i := 1; i <= items; i++ {
		fmt.Fprintf(&b, "## Benchmark item %d\n\nWhat the benchmark sends, with **some** emphasis. [Read more](https://example.com/bench/%d)\n\n", i, i)
	}
	return b.String()
}

// tail keeps the last 4 KB written to it: a service's log, for errors.
// exec copies the log into it from a goroutine of its own.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8192 {
		t.b = append([]byte(nil), t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
