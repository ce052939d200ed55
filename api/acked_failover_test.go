package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestAckedSignupsSurviveFailover is issue #45's promise: a signup
// answered 2xx is on the replica that takes over when the primary dies.
// A primary and a replica (redis-server) are linked through a proxy the
// test stalls, so the replica lags while still connected; signups are
// then made through the real handler chain, the link is cut, the primary
// killed (SIGKILL) and the replica promoted (REPLICAOF NO ONE). With the replicas' acknowledgement on, every signup
// answered 2xx is on the promoted replica (those answered 503 may be
// missing: that is what the 503 said). With it off, the same steps lose
// signups that were answered 202: the test sees the difference, so it
// can fail.
func TestAckedSignupsSurviveFailover(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (Debian package redis-server): the failover of a primary to its replica needs two real servers")
	}
	for _, on := range []bool{true, false} {
		t.Run("ack="+strconv.FormatBool(on), func(t *testing.T) { failoverSignups(t, on) })
	}
}

func failoverSignups(t *testing.T, on bool) {
	ctx := context.Background()
	primary := startRedis(t)
	link := newLinkProxy(t, primary.addr)
	replica := startRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(link.port()))
	rdb := redis.NewClient(&redis.Options{Addr: primary.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() }) // the primary is killed before
	onReplica := redis.NewClient(&redis.Options{Addr: replica.addr})
	t.Cleanup(func() { _ = onReplica.Close() })
	var acker Acker
	if on {
		acker = redisconn.NewAcker(rdb, 1, 200*time.Millisecond)
	}
	srv, stopAPI := failoverServer(t, rdb, acker)

	// The link works: once the replica's first sync is done, a signup
	// before the cut reaches it. Asked again while the replica was still
	// behind (a 503, with the acknowledgement on), the signup is the
	// same signup: it is by address.
	poll.Until(t, poll.BusyMachine, func() error {
		info, err := onReplica.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("the replica's link to the primary is not up yet: %v", err)
		}
		return nil
	})
	poll.Until(t, poll.BusyMachine, func() error {
		if code, _ := signup(t, srv, "before@example.com"); code != http.StatusAccepted {
			return fmt.Errorf("signup before the cut: %d, want 202", code)
		}
		return nil
	})
	// The replica caught up with all of it (its store is read once it
	// is promoted: a replica refuses the store's scripts).
	upTo := replOffset(t, rdb, "master_repl_offset")
	poll.Until(t, poll.BusyMachine, func() error {
		if got := replOffset(t, onReplica, "slave_repl_offset"); got < upTo {
			return fmt.Errorf("the replica is at offset %d of the primary's %d", got, upTo)
		}
		return nil
	})

	// The replica lags while the primary still counts it as connected
	// (so a WAIT that did not follow the request's writes would answer
	// at once with 1): the signups now are answered before it has them,
	// or not at all.
	link.stall()
	answered := map[string]int{}
	for i := range 3 {
		email := fmt.Sprintf("cut-%d@example.com", i)
		code, retryAfter := signup(t, srv, email)
		answered[email] = code
		switch {
		case code == http.StatusServiceUnavailable && on && retryAfter != "":
		case code == http.StatusAccepted && !on:
		default:
			t.Fatalf("signup %s with the replica lagging, ack %v: %d (Retry-After %q)", email, on, code, retryAfter)
		}
	}

	stopAPI()
	link.cut()
	primary.kill(t)
	if err := onReplica.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("REPLICAOF NO ONE: %v", err)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		info, err := onReplica.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "role:master") {
			return fmt.Errorf("the replica is not a primary yet: %v", err)
		}
		return nil
	})

	// Every promise kept: what was answered 2xx is on the new primary.
	replicaStore := store.NewRedis(onReplica)
	var lost []string
	for email, code := range answered {
		_, err := replicaStore.Get(ctx, email)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("reading %s on the promoted replica: %v", email, err)
		}
		if err != nil && code < 300 {
			lost = append(lost, email)
		}
	}
	if _, err := replicaStore.Get(ctx, "before@example.com"); err != nil {
		t.Errorf("the signup made before the cut is not on the promoted replica: %v", err)
	}
	// And it gets its mail: the confirmation was queued before the
	// answer, so the promoted replica holds its task too.
	insp := asynq.NewInspectorFromRedisClient(onReplica)
	if _, err := insp.GetTaskInfo(tasks.QueueTransactional, "confirm:before@example.com"); err != nil {
		t.Errorf("the confirmation of the signup made before the cut is not on the promoted replica: %v", err)
	}
	if on && len(lost) > 0 {
		t.Errorf("signups answered 202 and lost in the failover: %v", lost)
	}
	if !on && len(lost) != len(answered) {
		t.Errorf("without the replicas' acknowledgement, %d of %d signups answered 202 were lost, want all: the test would not see a broken promise", len(lost), len(answered))
	}
}

// replOffset is a replication offset from c's INFO replication.
func replOffset(t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication: %v", err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO replication has no %s:\n%s", field, info)
	return 0
}

// failoverServer is the API over rdb, with acker, as the binary builds it
// for a signup: the store, the outbox's dispatcher, the queue. stop ends
// it, before its Redis goes away: its dispatcher clears the outbox
// behind the answers, and would retry against a dead primary.
func failoverServer(t *testing.T, rdb *redis.Client, acker Acker) (srv *httptest.Server, stop func()) {
	t.Helper()
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	jobs := tasks.NewDispatcher(client, st, quiet)
	s := New(Config{DoubleOptIn: true}, Deps{
		Store: st, Jobs: jobs, Queue: client, Signer: token.NewSigner([]byte("0123456789abcdef"), 0),
		Log: quiet, Acker: acker,
	})
	srv = httptest.NewServer(s)
	var once sync.Once
	stop = func() { once.Do(func() { srv.Close(); jobs.Close() }) }
	t.Cleanup(stop)
	return srv, stop
}

// signup posts the public signup as a JSON client does, and returns the
// status and Retry-After.
func signup(t *testing.T, srv *httptest.Server, email string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+"/subscribe", "application/json", strings.NewReader(`{"email":"`+email+`"}`))
	if err != nil {
		t.Fatalf("signup %s: %v", email, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body) // the status is what counts
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// redisProc is a redis-server of the test's own.
type redisProc struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts a redis-server with args on a free port (in
// NEWSLETTER_TEST_CLUSTER_PORTS when set, the range this machine lets
// the tests' servers use), without persistence, and waits for it to
// answer. It is killed when the test ends.
func startRedis(t *testing.T, args ...string) *redisProc {
	t.Helper()
	dir := t.TempDir()
	for try := 1; ; try++ {
		port := freeTestPort(t)
		log := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log")
		cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log,
			// A replica's first sync starts at once, not after the
			// default 5 s wait for other replicas.
			"--repl-diskless-sync-delay", "0"}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.exited) }() // the log tells why it exited
		t.Cleanup(func() { p.kill(t) })
		err := waitRedis(p)
		if err == nil {
			return p
		}
		if try == 5 {
			text, _ := os.ReadFile(log) // shown in the failure, if any
			t.Fatalf("redis-server on port %d: %v\nits log:\n%s", port, err, text)
		}
	}
}

// waitRedis waits until p answers PING, or exits (its port was taken).
func waitRedis(p *redisProc) error {
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	defer func() { _ = c.Close() }() // nothing was written through it
	deadline := time.Now().Add(poll.BusyMachine)
	for {
		select {
		case <-p.exited:
			return errors.New("redis-server exited")
		default:
		}
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill SIGKILLs the server (a primary that dies, keeping nothing it had
// not sent on) and waits for it to be gone.
func (p *redisProc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill() // an error: it has exited already
	select {
	case <-p.exited:
	case <-time.After(poll.BusyMachine):
		t.Errorf("redis-server %s did not exit after SIGKILL", p.addr)
	}
}

var (
	testPortsMu sync.Mutex
	testPorts   = map[int]bool{} // handed out in this test binary
)

// freeTestPort is a loopback port free now and not handed out before
// here: from NEWSLETTER_TEST_CLUSTER_PORTS (lo-hi) when set, else any.
func freeTestPort(t *testing.T) int {
	t.Helper()
	testPortsMu.Lock()
	defer testPortsMu.Unlock()
	lo, hi := 0, 0
	if r := os.Getenv(rediscluster.EnvPorts); r != "" {
		a, b, _ := strings.Cut(r, "-")
		var errA, errB error
		lo, errA = strconv.Atoi(a)
		hi, errB = strconv.Atoi(b)
		if errA != nil || errB != nil || lo < 1 || lo > hi {
			t.Fatalf("%s=%q: want lo-hi", rediscluster.EnvPorts, r)
		}
	}
	for range 1000 {
		p := 0
		if lo > 0 {
			p = lo + rand.IntN(hi-lo+1)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		p = ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if !testPorts[p] {
			testPorts[p] = true
			return p
		}
	}
	t.Fatalf("no free port (%s=%q)", rediscluster.EnvPorts, os.Getenv(rediscluster.EnvPorts))
	return 0
}

// linkProxy forwards TCP to a server until stalled or cut. Stalled, it
// keeps its connections open and forwards nothing: both ends believe the
// link is up (the primary still counts its replica as connected) while
// the replica lags. Cut, it takes no more connections and closes the
// ones it has, dropping what it held: what the server sent after the
// stall reaches nobody. (A replica stopped with SIGSTOP would still
// receive into its socket's buffer, and have it all once resumed.)
type linkProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	moved   *sync.Cond // broadcast when stalled or done changes
	conns   []net.Conn
	stalled bool
	done    bool
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &linkProxy{ln: ln}
	l.moved = sync.NewCond(&l.mu)
	t.Cleanup(l.cut)
	go l.serve(target)
	return l
}

func (l *linkProxy) port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *linkProxy) serve(target string) {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return // cut
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close() // the replica dials again
			continue
		}
		if !l.keep(in, out) {
			return
		}
		go l.pipe(in, out)
		go l.pipe(out, in)
	}
}

// keep tracks a forwarded pair, or closes it when the link is cut.
func (l *linkProxy) keep(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		for _, c := range conns {
			_ = c.Close() // never used
		}
		return false
	}
	l.conns = append(l.conns, conns...)
	return true
}

// pipe forwards what src sends to dst, holding it while the link is
// stalled, until either side closes or the link is cut.
func (l *linkProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.open() {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close() // either may be closed already: the cut
	_ = src.Close()
}

// open waits while the link is stalled, and says whether it is still
// up (false: cut).
func (l *linkProxy) open() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.stalled && !l.done {
		l.moved.Wait()
	}
	return !l.done
}

// stall stops forwarding and keeps the connections open.
func (l *linkProxy) stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = true
	l.moved.Broadcast()
}

// cut stops forwarding for good: no new connections, the open ones
// closed, what was held dropped.
func (l *linkProxy) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	l.moved.Broadcast()
	_ = l.ln.Close() // the accept loop ends
	for _, c := range l.conns {
		_ = c.Close() // already closed by its pipe, at worst
	}
}
