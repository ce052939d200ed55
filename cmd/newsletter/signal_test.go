package main

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// waitExit waits for a started command to end and returns how it ended.
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) *os.ProcessState {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
			t.Fatalf("wait: %v", err)
		}
		return cmd.ProcessState
	case <-time.After(timeout):
		t.Fatalf("%s did not end within %s of the signal", cmd.Path, timeout)
	}
	return nil
}

// TestSignalEndsWithExitZero: SIGINT (Ctrl-C) and SIGTERM (an
// orchestrator's stop) are the ordinary way to end the service; after the
// clean shutdown the process exits 0, so a terminal, make or a supervisor
// does not report an error.
func TestSignalEndsWithExitZero(t *testing.T) {
	parallel(t) // processes on embedded Redis of their own, signalled by pid
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freeAddr(t)
			cmd := startProcess(t, "serve", map[string]string{"NEWSLETTER_ADDR": addr, "NEWSLETTER_REDIS_URL": "", "NEWSLETTER_SMTP_URL": ""})
			poll.True(t, poll.BusyMachine, "the service to listen", func() bool {
				resp, err := http.Get("http://" + addr + "/healthz")
				if err == nil {
					resp.Body.Close()
				}
				return err == nil && resp.StatusCode == http.StatusOK
			})
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if st := waitExit(t, cmd, time.Minute); st.ExitCode() != 0 {
				log, _ := os.ReadFile(cmd.Stdout.(*os.File).Name())
				t.Fatalf("%s after %s, want exit status 0:\n%s", st, sig, log)
			}
		})
	}
}

// TestMakeRunCtrlC: Ctrl-C on `make run` ends it without make's
// "Error 1". A terminal sends SIGINT to the whole foreground process
// group: to make, to its recipe and to the service. `go run` exits 1
// whenever it receives an interrupt, whatever its program did, so the
// target builds the binary and execs it instead.
func TestMakeRunCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary through the Makefile")
	}
	// Minutes of compiling on a fresh machine: beside the long tests that
	// wait on asynq's recoverer (longTestRedis), not before them.
	parallel(t)
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	out := &logtest.Buffer{}
	cmd := exec.Command(makePath, "--no-print-directory", "-C", root, "run", "BIN="+filepath.Join(t.TempDir(), "newsletter"))
	cmd.Env = append(os.Environ(), "NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL=", "NEWSLETTER_SMTP_URL=")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a process group of its own, as a terminal's job
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// The first build of the binary on a busy machine takes minutes.
	// The banner's last line, printed once the service handles signals
	// (the start-up warning about the embedded Redis says "nothing
	// survives a restart" too, before the handler is set: a SIGINT then
	// ends the process as any program's, and make reports it).
	poll.True(t, 10*time.Minute, "make run to print its banner", func() bool {
		return strings.Contains(out.String(), "embedded Redis in memory: nothing is durable")
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// make itself got the SIGINT too: once its recipe has ended it ends
	// by that signal, as an interrupted program should (a shell prints
	// nothing for it). What must not happen is a failed recipe: make's
	// "*** [Makefile:…: run] Error 1" and exit status 2.
	st := waitExit(t, cmd, time.Minute)
	ws := st.Sys().(syscall.WaitStatus)
	if !(ws.Exited() && ws.ExitStatus() == 0) && !(ws.Signaled() && ws.Signal() == syscall.SIGINT) || strings.Contains(out.String(), "***") {
		t.Fatalf("make run after Ctrl-C: %s, want exit status 0 or the interrupt itself, and no make error:\n%s", st, out)
	}
	if !strings.Contains(out.String(), "msg=stopped") {
		t.Fatalf("the service did not shut down cleanly:\n%s", out)
	}
}
