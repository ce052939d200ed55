package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A role is one process of the service (api, worker or scheduler) that
// the soak keeps running: a fault stops it, and it is started again
// after a pause, as an orchestrator would. An exit nobody asked for is
// counted as a crash.
type role struct {
	name string // "api-1", "worker-2", …
	args []string
	addr string // NEWSLETTER_ADDR: its health, metrics (and for api, the routes)
	bin  string
	env  []string
	dir  string

	// extra is added to env at the next start (a skewed clock).
	extra []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	expected bool // the soak stopped it
	crashes  int
	starts   int
}

func (r *role) start() error {
	log, err := os.OpenFile(filepath.Join(r.dir, r.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, r.args...)
	r.mu.Lock()
	extra := r.extra
	r.mu.Unlock()
	cmd.Env = append(append(append(os.Environ(), r.env...), extra...), "NEWSLETTER_ADDR="+r.addr)
	cmd.Stdout, cmd.Stderr = log, log
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		warn("close log", log.Close())
		return fmt.Errorf("%s: %w", r.name, err)
	}
	exited := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.exited, r.expected = cmd, exited, false
	r.starts++
	r.mu.Unlock()
	go func() {
		err := cmd.Wait()
		warn("close log", log.Close())
		r.mu.Lock()
		if !r.expected {
			r.crashes++
			fmt.Fprintf(os.Stderr, "soak: %s exited on its own: %v\n", r.name, err)
		}
		r.mu.Unlock()
		close(exited)
	}()
	return nil
}

// restartWith stops the role (SIGTERM) and starts it again with extra
// added to its environment (nil: none).
func (r *role) restartWith(extra []string) error {
	r.stop(syscall.SIGTERM)
	r.mu.Lock()
	r.extra = extra
	r.mu.Unlock()
	return r.start()
}

// stop sends sig and waits for the exit (SIGTERM: up to the role's
// shutdown timeout and a margin, then SIGKILL).
func (r *role) stop(sig syscall.Signal) {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.expected = true
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	warn("signal "+r.name, ignoreDone(cmd.Process.Signal(sig)))
	select {
	case <-exited:
	case <-time.After(40 * time.Second):
		warn("kill "+r.name, ignoreDone(cmd.Process.Kill()))
		<-exited
	}
}

// ignoreDone drops the error of a signal to a process that has already
// exited: the stop it asked for has happened.
func ignoreDone(err error) error {
	if err != nil && strings.Contains(err.Error(), "process already finished") {
		return nil
	}
	return err
}

// pid is the live process's id, 0 when it is down.
func (r *role) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.expected {
		return 0
	}
	select {
	case <-r.exited:
		return 0
	default:
		return r.cmd.Process.Pid
	}
}

// rss is the process's resident set in bytes (/proc), 0 when down.
func (r *role) rss() float64 {
	pid := r.pid()
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
