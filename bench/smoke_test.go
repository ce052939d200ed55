package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// smokeRun is one benchmark at a tiny size: the program (a folder of
// bench/), its environment beside the one every run gets (the variables
// its Makefile target passes), and the lines it must print: its figures
// and targets, by their stable labels.
type smokeRun struct {
	name, program string
	env           []string
	// redis: the run needs a Redis (NEWSLETTER_BENCH_REDIS_URL, or
	// REDIS_URL for bench-list); redisServer: it starts redis-servers of
	// its own (bench-scale).
	redis, redisServer bool
	want               []string // regular expressions, each matched against the output
}

// smokeRuns are the `make bench-*` targets built from bench/, each at a
// size that takes a second or two. bench-isolation is a `go test -bench`
// of cmd/newsletter: TestLaneIsolationBenchmarkRuns smokes it there.
var smokeRuns = []smokeRun{
	{name: "bench-subscribe", program: "subscribe", redis: true, want: []string{
		`(?m)^POST /subscribe \(API\)\s+\d+/s`, `(?m)^raw asynq enqueue\s+\d+/s`,
		`(?m)^ratio\s+[\d.]+ of raw enqueue \(target >= 0\.50\), p99 \S+ \(target < 50ms\)`}},
	{name: "bench-send", program: "send", want: []string{
		`(?m)^bare SMTP loop .*\d+/s`, `(?m)^pool, 16 connection\(s\)\s+\d+/s .*% of bare`,
		`(?m)^target: the pool with 16 connections reaches at least 80% of the bare loop`}},
	{name: "bench-digest", program: "digest", redis: true, env: []string{"N=300", "ITEMS=1,20"}, want: []string{
		`(?m)^settings saved on the benchmark Redis: postal address`,
		`(?m)^\| 1 \| [\d.]+ KB \| \d+ \| \d+ µs \| \d+ µs \|`, `(?m)^\| 20 \| [\d.]+ KB \| \d+ \| \d+ µs \| \d+ µs \|`,
		`(?m)^worker peak RSS\s+[\d.]+ MB \(target < 60 MB\)`, `(?m)^\| 1 \| [\d.]+ \| [\d.]+ \| \d+ \| [\d.]+ \| [\d.]+ \| \d+ \|$`, `(?m)^DKIM signature of a .* RSA-2048 \d+ µs Ed25519 \d+ µs`}},
	{name: "bench-digest SINK=plain", program: "digest", redis: true, env: []string{"N=300", "ITEMS=1", "SINK=plain"}, want: []string{
		`(?m)^the sink offers neither PIPELINING nor CHUNKING`, `(?m)^\| 1 \| [\d.]+ \| [\d.]+ \| \d+ \| [\d.]+ \| [\d.]+ \| \d+ \|$`}},
	{name: "bench-issue", program: "digest", redis: true, env: []string{"N=300", "ITEMS=20", "ISSUE=1"}, want: []string{
		`(?m)^\| 20 \| [\d.]+ KB \| \d+ \|`, `(?m)^\| issue \(Markdown, 20 sections\) \| [\d.]+ KB \| \d+ \| \d+ µs \| \d+ µs \|`,
		`(?m)^issue Markdown rendered 1 time\(s\) for 240 mails`}},
	{name: "bench-push", program: "push", want: []string{
		`(?m)^push\.Client\.Send \(the lane's sender\)\s+\d+/s .*CPU \d+µs/notification`,
		`(?m)^target: at least 2,000 notifications/s through push\.Client\.Send`}},
	{name: "bench-archive", program: "archive", redis: true, want: []string{
		`(?m)^GET /archive/\{slug\}\s+\d+/s`, `(?m)^GET /archive/feed\.atom\s+\d+/s`,
		`(?m)^page target 5000/s and p99 < 20ms: `, `(?m)^feed target 5000/s and p99 < 20ms: `}},
	{name: "bench-redirect", program: "redirect", redis: true, want: []string{
		`(?m)^GET /r/\{token\}\s+\d+/s`, `(?m)^counted in Redis: \d+ clicks`, `(?m)^target 20000/s and p99 < 10ms: `}},
	{name: "bench-fanout", program: "fanout", redis: true, env: []string{"N=300"}, want: []string{
		`(?m)^first run: .* µs per recipient and channel \(target ≤ 20 µs\)`, `(?m)^run again \(every reader marked\): `}},
	{name: "bench-sms", program: "sms", redis: true, env: []string{"N=300"}, want: []string{
		`(?m)^bare loop \(sms\.Client\.Send, 16 goroutines\)\s+\d+`, `(?m)^sms lane \(sms:deliver, worker, 16 workers\)\s+\d+ .*% of bare's rate`}},
	{name: "bench-mobile", program: "mobile", redis: true, env: []string{"N=300"}, want: []string{
		`(?m)^bare loops \(fcm \+ apns Client\.Send, 8 goroutines each\)\s+\d+`, `(?m)^push lane \(push:deliver, worker, 32 workers\)\s+\d+ .*% of bare's rate`}},
	{name: "bench-segment", program: "segment", redis: true, env: []string{"N=300", "ROUNDS=2"}, want: []string{
		`(?m)^count "topic:updates AND tag:beta AND NOT tag:paid": \d+ active .* median [\d.]+ ms`,
		`(?m)^walk "topic:updates AND tag:beta AND NOT tag:paid": \d+ readers`}},
	{name: "bench-list", program: "list", redis: true, env: []string{"N=300", "QUERIES=20"}, want: []string{
		`(?m)^search: 20 queries .* p99 \S+ .*\(target p99 < 50ms\)`, `(?m)^export: 300 rows, .* rows/s \(target >= 50000\)`}},
	{name: "bench-login", program: "login", redis: true, env: []string{"N=20"}, want: []string{
		`(?m)^answers: \d+ x \d{3}`, `(?m)^503 \(too many hashes at once\): \d+`,
		`(?m)^RSS before \d+ MB, peak \d+ MB \(VmHWM\); target < \d+ MB: `}},
	{name: "bench-inbox", program: "inbox", redis: true, env: []string{"N=300", "STREAMS=30"}, want: []string{
		`(?m)^memory per stream: RSS [\d.]+ KB, Go heap\+stacks [\d.]+ KB \(target < 20 KB\): `,
		`(?m)^event to 300 readers reaching 30 open streams: first Send to last stream's message \S+; writes done in \S+ \(\d+ writes/s\)`,
		`(?m)^Redis CPU per inbox message: [\d.]+ µs with the streams, [\d.]+ µs without`,
		`(?m)^Redis memory per kept message: -?\d+ B the first .*, -?\d+ B the next`}},
	{name: "bench-ack", program: "ack", redisServer: true, env: []string{"PAIRS=1"}, want: []string{
		`(?m)^\| 1 \| 0 \| \d+ \| \S+ \| \S+ \| \d+ \| [\d.]+ µs \|`, `(?m)^\| 1 \| 1 \| \d+ \| \S+ \| \S+ \| \d+ \| [\d.]+ µs \|`,
		`(?m)^with the wait: [\d.]+ of the rate without it`}},
	{name: "bench-scale", program: "scale", redisServer: true,
		env: []string{"N=2000", "CHECKPOINTS=2000", "WARMUP=100", "MAILS=1000", "WINDOW=2s", "IDLE=500ms"}, want: []string{
			`(?m)^settings saved on the cluster Redis: postal address`, `(?m)^settings saved on the single Redis: postal address`,
			`(?m)^\| 2,000 \| cluster \| [\d,]+ \| [\d.]+ B \|`, `(?m)^\| 2,000 \| single \| [\d,]+ \| [\d.]+ B \|`,
			`(?m)^at 2,000: cluster [\d.]+ µs, single [\d.]+ µs of Redis CPU per mail: cluster/single [\d.]+ \(target ≤ 1\.20\)`}},
}

// TestBenchmarksRun is the benchmarks' smoke run: every program of
// bench/, built once, runs at a tiny size and must end with 0 and print
// its figures and targets. It checks that each runs, not how fast: a
// benchmark that stopped running (a rule it does not meet, a renamed
// route or flag) fails the suite instead of the next person who wants a
// figure.
func TestBenchmarksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmarks' smoke run builds every benchmark (make test runs it)")
	}
	bin := buildBenchmarks(t)
	redisURL, why := smokeRedis(t)
	for _, r := range smokeRuns {
		t.Run(r.name, func(t *testing.T) {
			env := []string{"BENCH_DURATION=300ms", "NEWSLETTER_BENCH_BIN=" + filepath.Join(bin, "newsletter")}
			switch {
			case r.redis && redisURL == "":
				t.Skip(why)
			case r.redis:
				env = append(env, "NEWSLETTER_BENCH_REDIS_URL="+redisURL, "REDIS_URL="+redisURL)
			case r.redisServer:
				base, err := freePortBlock()
				if err != nil {
					t.Skip(err)
				}
				env = append(env, "PORT_BASE="+strconv.Itoa(base))
			}
			out := runBenchmark(t, filepath.Join(bin, r.program), append(env, r.env...))
			for _, w := range r.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("%s printed no line matching %s; it printed:\n%s", r.name, w, out)
				}
			}
		})
	}
}

// buildBenchmarks builds every program of bench/ and the newsletter
// binary they start (NEWSLETTER_BENCH_BIN: otherwise each would build it
// again) into one folder, once.
func buildBenchmarks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// One go build: it links the programs side by side.
	args := []string{"build", "-o", dir + "/", "./...", "../cmd/newsletter"}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}

// runBenchmark runs program with this process's environment, less its
// NEWSLETTER_ settings (which could point it at another Redis), plus env,
// and returns what it printed. A run that has not ended after
// poll.BusyMachine is killed with what it started (its process group:
// bench-scale's redis-servers) and fails: a hang, not a slow machine.
func runBenchmark(t *testing.T, program string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.BusyMachine)
	defer cancel()
	cmd := exec.CommandContext(ctx, program)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEWSLETTER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v (deadline %s); it printed:\n%s", filepath.Base(program), env, err, poll.BusyMachine, out.String())
	}
	return out.String()
}

// smokeRedis is the Redis the smoke run's benchmarks use: the test Redis
// (NEWSLETTER_TEST_REDIS_URL) on redistest.DBBench, else a redis-server
// of the test's own when one is installed. The benchmarks read Redis's
// INFO (CPU, commands), which the embedded miniredis does not keep, so
// without either the runs that need a Redis are skipped, with why.
func smokeRedis(t *testing.T) (url, why string) {
	t.Helper()
	if os.Getenv(redistest.EnvURL) != "" {
		_, url := redistest.New(t, redistest.DBBench)
		return url, ""
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "", "needs a Redis: set " + redistest.EnvURL + " or install redis-server"
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Process.Kill(); err != nil {
			t.Logf("stop redis-server: %v", err)
		}
		_ = srv.Wait() // killed: its exit status says so, nothing more
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	poll.True(t, poll.BusyMachine, "redis-server to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close() // a probe: only the dial mattered
		}
		return err == nil
	})
	return "redis://" + addr + "/0", ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePortBlock is a PORT_BASE for bench-scale whose ports are free now:
// base to base+31 (the nodes, the single Redis, the service, the sink)
// and the cluster bus ports base+10000 to base+10005. Tried at a few
// bases, so a run beside another (or a fixed base someone else uses)
// does not collide.
func freePortBlock() (int, error) {
	for base := 21000; base < 29000; base += 500 + int(time.Now().UnixNano()%97) {
		if blockFree(base) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no free block of ports for bench-scale between 21000 and 39000")
}

func blockFree(base int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close() // only probing whether the port is free
		}
	}()
	for _, span := range [][2]int{{base, base + 31}, {base + 10000, base + 10005}} {
		for port := span[0]; port <= span[1]; port++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				return false
			}
			held = append(held, l)
		}
	}
	return true
}

// TestEveryBenchmarkSmoked: every `make bench-*` target has a smoke run
// (bench-isolation's is TestLaneIsolationBenchmarkRuns, in
// cmd/newsletter), so a new benchmark cannot be left out of the suite.
func TestEveryBenchmarkSmoked(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	smoked := map[string]bool{"bench-isolation": true}
	for _, r := range smokeRuns {
		smoked[r.name] = true
	}
	targets := regexp.MustCompile(`(?m)^(bench-[a-z]+):`).FindAllStringSubmatch(string(raw), -1)
	if len(targets) == 0 {
		t.Fatal("no bench-* target in the Makefile")
	}
	for _, m := range targets {
		if !smoked[m[1]] {
			t.Errorf("make %s has no smoke run: add it to smokeRuns", m[1])
		}
	}
}
