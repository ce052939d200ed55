package rediscluster

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill a node when the test binary dies without
// running its cleanups (a panic in another goroutine, go test's -timeout),
// so no cluster outlives its test holding ports and memory.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
