package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// ownWait bounds the wait for a private redis-server to answer or exit:
// see poll.BusyMachine.
const ownWait = poll.BusyMachine

// Own gives the test a Redis no other test uses, then lets it run in
// parallel with the package's other such tests (it calls t.Parallel
// before starting anything, so a test that must own something global, a
// fixed port or t.Setenv, must not call it):
//
//   - NEWSLETTER_TEST_REDIS_URL set and redis-server on the PATH: a
//     redis-server of the test's own (a free loopback port, no
//     persistence: --save "" --appendonly no), on database db, killed
//     when the test ends. The shared Redis is not touched.
//   - NEWSLETTER_TEST_REDIS_URL unset: an embedded miniredis, as New
//     gives, which is the test's own already.
//   - NEWSLETTER_TEST_REDIS_URL set and no redis-server: New's database db
//     of the shared Redis, flushed first; the test then does not call
//     t.Parallel and runs one after another with the package's others,
//     as every test did before Own.
//
// The client is closed when the test ends; the URL reaches the same
// database (for subprocesses).
func Own(t *testing.T, db int) (*redis.Client, string) {
	t.Helper()
	if os.Getenv(EnvURL) == "" {
		parallel(t)
		return New(t, db)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return New(t, db)
	}
	parallel(t)
	addr := startServer(t, bin)
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("redistest: close: %v", err)
		}
	})
	return c, "redis://" + addr + "/" + strconv.Itoa(db)
}

// AfterParallel, when set, is called by Own right after its t.Parallel:
// a package can hold its parallel tests to a gate of its own there
// (cmd/newsletter's, which lets its longest tests start first). Set it
// in TestMain, before any test runs.
var AfterParallel func(t *testing.T)

func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	if AfterParallel != nil {
		AfterParallel(t)
	}
}

// Ports handed to a private redis-server in this test binary: a port
// freed by closing a listener could otherwise be picked again at once by
// a test running beside.
var (
	portsMu sync.Mutex
	taken   = map[int]bool{}
)

func freePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: listen: %v", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			t.Fatalf("redistest: close: %v", err)
		}
		if !taken[p] {
			taken[p] = true
			return p
		}
	}
}

// startServer starts a redis-server and returns its address once it
// answers. The port was free when picked, but another process on the
// machine may bind it before redis-server does: that server then exits
// (or, had it bound, would not be ours: the answer to PING must come from
// our process id), and it is started again on another port.
func startServer(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	const attempts = 5
	for try := 1; ; try++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logPath := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log")
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logPath)
		setProcAttr(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			// The exit status says nothing a test needs: the log does,
			// and the cleanup below kills the process anyway.
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill() // an error: it has exited already
			select {
			case <-exited:
			case <-time.After(ownWait):
				t.Errorf("redistest: redis-server on port %d did not exit after SIGKILL", port)
			}
		})
		err := waitOurs(addr, cmd.Process.Pid, exited)
		if err == nil {
			return addr
		}
		log, _ := os.ReadFile(logPath) // best effort: shown in the failure
		if !strings.Contains(string(log), "Address already in use") && !errors.Is(err, errNotOurs) || try == attempts {
			t.Fatalf("redistest: redis-server on port %d: %v\nits log:\n%s", port, err, log)
		}
		t.Logf("redistest: port %d was taken before redis-server bound it; trying another", port)
	}
}

var errNotOurs = errors.New("another process answers on the port")

// waitOurs waits until the redis-server of process pid answers on addr,
// or it exits.
func waitOurs(addr string, pid int, exited <-chan struct{}) error {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = cl.Close() }() // nothing was written through it
	deadline := time.Now().Add(ownWait)
	for {
		select {
		case <-exited:
			return errors.New("redis-server exited")
		default:
		}
		info, err := cl.Info(context.Background(), "server").Result()
		if err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n") {
				return errNotOurs
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %s: %w", ownWait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
