// Command inbox is `make bench-inbox` (issue #44, point 6): the in-app
// inbox's open streams and its writes.
//
//  1. STREAMS event streams (default 10,000) are opened, each by its own
//     reader, to the inbox's routes served by net/http in a child process
//     of their own (this binary again, as the API role mounts them: under
//     /inbox, with the service's server bounds). The clients are raw TCP
//     in this process, so their cost is not the server's. It prints the
//     server's memory per open stream: its resident memory (VmRSS) and
//     its Go heap and stacks (runtime.MemStats HeapInuse + StackInuse,
//     after a GC), from before the streams to with all of them open,
//     divided by their count (target under 20 KB).
//  2. One event to N readers (default 100,000), STREAMS of them with a
//     stream open, is written through Channel.Send in batches of 100
//     (the channel's MaxBatch) by 8 goroutines (the lane's workers): the
//     time from the first Send to the last stream's `message` event, the
//     writes/s, and Redis's CPU (INFO cpu) and memory (INFO memory
//     used_memory) per message, the streams' reads included.
//  3. The streams closed, a second event to the same N readers: Redis's
//     CPU and memory per message written with nobody listening, a message
//     added to an inbox that exists.
//
// make bench-inbox [N=100000] [STREAMS=10000]; NEWSLETTER_BENCH_REDIS_URL
// picks the Redis (default 127.0.0.1:6379 db 15, which is emptied).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/inbox"
)

const (
	secret    = "benchmark-inbox-secret-0123456789"
	serverEnv = "NEWSLETTER_BENCH_INBOX_SERVER"
	// workers and batch are the lane's: inbox.Plugin's Workers and the
	// channel's MaxBatch.
	workers = 8
	batch   = 100
	// targetKB is issue #44's bound on the server's memory per stream.
	targetKB = 20
	// opening bounds the streams being opened at once.
	opening = 256
	// messageWait bounds the wait for the last stream's event.
	messageWait = 3 * time.Minute
	// heartbeatNote is the stream's heartbeat (channels/inbox stream.go).
	heartbeatNote = "25s"
)

func main() {
	var job serverJob
	if ok, err := bench.ChildJob(serverEnv, &job); ok || err != nil {
		if err == nil {
			err = serve(job)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-inbox server:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-inbox:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func run() error {
	n, streams := envInt("N", 100_000), envInt("STREAMS", 10_000)
	streams = min(streams, n)
	ctx := context.Background()
	fds, err := raiseFDs(streams + 1000)
	if err != nil {
		return err
	}
	redisURL := bench.RedisURL()
	rdb, err := bench.Redis(ctx, redisURL)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()

	addr, err := bench.FreeAddr()
	if err != nil {
		return err
	}
	srv, err := bench.StartChild(serverEnv, serverJob{RedisURL: redisURL, Addr: addr, FDs: streams + 1000})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Go(); err != nil {
		return err
	}
	base := "http://" + addr
	if err := bench.WaitHTTP(base + "/bench/mem"); err != nil {
		return err
	}
	fmt.Printf("redis %s; inbox server in its own process (pid %d, GOMAXPROCS %d), clients raw TCP in this one; open files limit %d; %d cores\n",
		redisURL, srv.Pid(), runtime.GOMAXPROCS(0), fds, runtime.NumCPU())

	// 1. The streams, and the server's memory with them open.
	stride := int64(n / streams)
	ids := make([]int64, streams)
	for i := range ids {
		ids[i] = int64(i+1) * stride // spread over the readers, so over the batches
	}
	before, err := serverMem(base, srv.Pid())
	if err != nil {
		return err
	}
	cl := newClients(addr, len(ids))
	defer cl.closeAll()
	t0 := time.Now()
	if err := cl.open(ids); err != nil {
		return err
	}
	opened := time.Since(t0)
	time.Sleep(time.Second) // the streams in their loop, the server idle
	with, err := serverMem(base, srv.Pid())
	if err != nil {
		return err
	}
	if with.Open != len(ids) {
		return fmt.Errorf("the server counts %d open streams, want %d", with.Open, len(ids))
	}
	s := float64(len(ids))
	rssKB := float64(with.RSS-before.RSS) / 1024 / s
	goKB := float64(with.Heap+with.Stack-before.Heap-before.Stack) / 1024 / s
	fmt.Printf("\n%d streams opened in %s (%.0f/s), each its own reader\n", len(ids), opened.Round(time.Millisecond), s/opened.Seconds())
	fmt.Printf("| server | before | with %d streams | per stream |\n| --- | ---: | ---: | ---: |\n", len(ids))
	fmt.Printf("| RSS (VmRSS) | %.1f MB | %.1f MB | %.1f KB |\n", mb(before.RSS), mb(with.RSS), rssKB)
	fmt.Printf("| Go heap in use | %.1f MB | %.1f MB | %.1f KB |\n", mb(before.Heap), mb(with.Heap), float64(with.Heap-before.Heap)/1024/s)
	fmt.Printf("| Go stacks in use | %.1f MB | %.1f MB | %.1f KB |\n", mb(before.Stack), mb(with.Stack), float64(with.Stack-before.Stack)/1024/s)
	fmt.Printf("| goroutines | %d | %d | %.2f |\n", before.Goroutines, with.Goroutines, float64(with.Goroutines-before.Goroutines)/s)
	fmt.Printf("memory per stream: RSS %.1f KB, Go heap+stacks %.1f KB (target < %d KB): %v\n", rssKB, goKB, targetKB, rssKB < targetKB)

	if d, err := time.ParseDuration(os.Getenv("HOLD")); err == nil {
		// A look at where the streams' memory goes while they are open.
		fmt.Printf("holding the streams open for %s: go tool pprof %s/debug/pprof/heap\n", d, base)
		time.Sleep(d)
	}

	// 2. One event to n readers, the streams open.
	wc := inbox.NewWith(inbox.Config{Secret: []byte(secret)}, channels.Env{Redis: rdb})
	msgs, err := eventMessages("ev:ev_bench1", "The first event", n)
	if err != nil {
		return err
	}
	first, err := writeAll(ctx, rdb, wc, msgs, func() error { return cl.waitMessages(messageWait) })
	if err != nil {
		return err
	}
	last := time.Unix(0, cl.lastAt.Load())
	fmt.Printf("\none event to %d readers, %d of them with a stream open: Channel.Send, batches of %d, %d goroutines\n", n, len(ids), batch, workers)
	fmt.Printf("event to %d readers reaching %d open streams: first Send to last stream's message %s; writes done in %s (%.0f writes/s)\n",
		n, len(ids), last.Sub(first.start).Round(time.Millisecond), first.writes.Round(time.Millisecond), float64(n)/first.writes.Seconds())

	// 3. The streams closed, a second event to the same readers.
	cl.closeAll()
	if err := waitClosed(base, srv.Pid()); err != nil {
		return err
	}
	if after, err := serverMem(base, srv.Pid()); err != nil {
		return err
	} else if len(after.Warnings) > 0 {
		fmt.Printf("the server's warnings (a stream whose read failed waits for its heartbeat, %s):\n", heartbeatNote)
		for msg, k := range after.Warnings {
			fmt.Printf("  %d x %s\n", k, msg)
		}
	}
	msgs, err = eventMessages("ev:ev_bench2", "The second event", n)
	if err != nil {
		return err
	}
	second, err := writeAll(ctx, rdb, wc, msgs, func() error { return nil })
	if err != nil {
		return err
	}
	fmt.Printf("\n| writes of %d messages | writes/s | Redis CPU per message | Redis memory per message |\n| --- | ---: | ---: | ---: |\n", n)
	for _, w := range []struct {
		name string
		res  writeRun
	}{{fmt.Sprintf("first event, %d streams open (new inboxes; the streams' reads counted)", len(ids)), first},
		{"second event, no stream open (a message added to an inbox)", second}} {
		fmt.Printf("| %s | %.0f | %.1f µs | %.0f B |\n", w.name, float64(n)/w.res.writes.Seconds(),
			float64(w.res.cpu.Nanoseconds())/1000/float64(n), float64(w.res.mem)/float64(n))
	}
	fmt.Printf("Redis CPU per inbox message: %.1f µs with the streams, %.1f µs without (INFO cpu used_cpu_sys+used_cpu_user)\n",
		float64(first.cpu.Nanoseconds())/1000/float64(n), float64(second.cpu.Nanoseconds())/1000/float64(n))
	fmt.Printf("Redis memory per kept message: %.0f B the first (its inbox's keys), %.0f B the next (INFO memory used_memory)\n",
		float64(first.mem)/float64(n), float64(second.mem)/float64(n))
	fmt.Printf("  first event, per message: %s\n", first.stats.PerMail(int64(n), 6))
	fmt.Printf("  second event, per message: %s\n", second.stats.PerMail(int64(n), 6))
	if first.failed+second.failed > 0 {
		return fmt.Errorf("%d messages not sent", first.failed+second.failed)
	}
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// eventMessages is event key's message to readers 1 to n, as the generic
// lane hands it over (its eventJSON: the inbox has no Composer), in
// batches of the channel's MaxBatch.
func eventMessages(key, title string, n int) ([][]channels.Message, error) {
	at := time.Now()
	body := "A short **Markdown** body, as an event's: what changed, [where](https://app.example/changes), and why it matters to you."
	var out [][]channels.Message
	for from := 1; from <= n; from += batch {
		var b []channels.Message
		for id := from; id < from+batch && id <= n; id++ {
			raw, err := json.Marshal(channels.EventMessage{Key: key, Person: int64(id), Topics: []string{"updates"},
				Title: title, Body: body, URL: "https://app.example/" + key, At: at})
			if err != nil {
				return nil, err
			}
			b = append(b, channels.Message{To: strconv.Itoa(id), Body: raw})
		}
		out = append(out, b)
	}
	return out, nil
}

// writeRun is one event's writes: when they started, how long they took,
// and what Redis spent from before them to after wait.
type writeRun struct {
	start  time.Time
	writes time.Duration
	cpu    time.Duration
	mem    int64
	stats  bench.RedisStats
	failed int
}

// writeAll sends the batches from workers goroutines, then waits (wait:
// the streams' events) before reading what Redis spent.
func writeAll(ctx context.Context, rdb *redis.Client, c *inbox.Channel, batches [][]channels.Message, wait func() error) (writeRun, error) {
	var r writeRun
	stats0, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return r, err
	}
	cpu0, mem0, err := redisInfo(ctx, rdb)
	if err != nil {
		return r, err
	}
	todo := make(chan []channels.Message, len(batches))
	for _, b := range batches {
		todo <- b
	}
	close(todo)
	var failed atomic.Int64
	var wg sync.WaitGroup
	r.start = time.Now()
	for range workers {
		wg.Go(func() {
			for b := range todo {
				for _, o := range c.Send(ctx, b) {
					if o.Verdict != channels.Sent {
						if failed.Add(1) == 1 {
							fmt.Fprintf(os.Stderr, "bench-inbox: a message not sent: %v %v\n", o.Verdict, o.Err)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	r.writes = time.Since(r.start)
	r.failed = int(failed.Load())
	if err := wait(); err != nil {
		return r, err
	}
	cpu1, mem1, err := redisInfo(ctx, rdb)
	if err != nil {
		return r, err
	}
	stats1, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return r, err
	}
	r.cpu, r.mem, r.stats = cpu1-cpu0, mem1-mem0, stats1.Since(stats0)
	return r, nil
}

// redisInfo is Redis's CPU so far (INFO cpu: used_cpu_sys +
// used_cpu_user) and its memory (INFO memory: used_memory).
func redisInfo(ctx context.Context, rdb *redis.Client) (time.Duration, int64, error) {
	info, err := rdb.Info(ctx, "cpu", "memory").Result()
	if err != nil {
		return 0, 0, err
	}
	f := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = v
		}
	}
	user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	mem, err3 := strconv.ParseInt(f["used_memory"], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("INFO cpu, memory: %w", err)
	}
	return time.Duration((user + sys) * float64(time.Second)), mem, nil
}

// raiseFDs raises this process's open files limit to at least want (the
// hard limit too, when it may), and answers the limit it got.
func raiseFDs(want int) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Max < uint64(want) {
		lim.Max = uint64(want) // root may; otherwise the hard limit stays
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim.Max, Max: lim.Max}); err != nil {
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				return 0, err
			}
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < uint64(want) {
		return lim.Cur, fmt.Errorf("open files limit %d, want %d (ulimit -n)", lim.Cur, want)
	}
	return lim.Cur, nil
}

// memAnswer is the server's GET /bench/mem, after a GC; RSS is filled in
// from /proc.
type memAnswer struct {
	Heap, Stack int64
	Goroutines  int
	Open        int
	Warnings    map[string]int // the inbox's warnings so far, by message
	RSS         int64
}

// serverMem reads the server's memory: its Go heap and stacks from
// itself, its resident memory from /proc.
func serverMem(base string, pid int) (memAnswer, error) {
	var m memAnswer
	resp, err := http.Get(base + "/bench/mem")
	if err != nil {
		return m, err
	}
	defer func() { bench.Warn("close /bench/mem", resp.Body.Close()) }()
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return m, err
	}
	kb, err := statusKB(pid, "VmRSS")
	m.RSS = kb << 10
	return m, err
}

// waitClosed waits until the server has no stream open.
func waitClosed(base string, pid int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := serverMem(base, pid)
		if err != nil {
			return err
		}
		if m.Open == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server still has %d streams open", m.Open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statusKB reads a field of /proc/pid/status in kB.
func statusKB(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// clients are the open streams, each a raw TCP connection read by a
// goroutine of its own: the least a client can be, so what grows is the
// server's.
type clients struct {
	addr      string
	mu        sync.Mutex
	conns     []net.Conn
	waiting   atomic.Int64 // streams yet to get their message event
	lastAt    atomic.Int64 // when the last one got it (Unix ns)
	allGot    chan struct{}
	closeOnce sync.Once
}

func newClients(addr string, n int) *clients {
	c := &clients{addr: addr, allGot: make(chan struct{})}
	c.waiting.Store(int64(n))
	return c
}

// open opens a stream for each of ids and returns once each has had its
// first event (the count): the stream is in its loop.
func (c *clients) open(ids []int64) error {
	sem := make(chan struct{}, opening)
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			ready := make(chan error, 1)
			go c.stream(id, ready)
			errs <- <-ready
			<-sem
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		return fmt.Errorf("%d of %d streams did not open, the first: %w", len(all), len(ids), all[0])
	}
	return nil
}

// stream opens person id's stream, says on ready when it had its first
// event, and reads it until the connection closes, noting its first
// message event.
func (c *clients) stream(id int64, ready chan<- error) {
	email := "u" + strconv.FormatInt(id, 10) + "@example.com"
	hash, err := inbox.Hash([]byte(secret), email)
	if err != nil {
		ready <- err
		return
	}
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		ready <- err
		return
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	req := "GET /inbox/stream HTTP/1.1\r\nHost: bench\r\nX-Inbox-Subscriber: " + email + "\r\nX-Inbox-Hash: " + hash + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		ready <- err
		return
	}
	br := bufio.NewReaderSize(conn, 512)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		ready <- fmt.Errorf("stream of %s: %q %v", email, status, err)
		return
	}
	opened, got := false, false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if !opened {
				ready <- fmt.Errorf("stream of %s: %w", email, err)
			}
			return
		}
		// The body is chunked: the events' lines come between the chunks'
		// size lines, which no event line starts like.
		switch {
		case !opened && strings.HasPrefix(line, "event: count"):
			opened = true
			ready <- nil
		case !got && strings.HasPrefix(line, "event: message"):
			got = true
			now := time.Now().UnixNano()
			for {
				last := c.lastAt.Load()
				if now <= last || c.lastAt.CompareAndSwap(last, now) {
					break
				}
			}
			if c.waiting.Add(-1) == 0 {
				close(c.allGot)
			}
		}
	}
}

// waitMessages waits until every stream had its message event.
func (c *clients) waitMessages(d time.Duration) error {
	select {
	case <-c.allGot:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%d streams had no message event after %s", c.waiting.Load(), d)
	}
}

// closeAll closes every stream.
func (c *clients) closeAll() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, conn := range c.conns {
			_ = conn.Close() // the reader's goroutine ends on its error
		}
	})
}
