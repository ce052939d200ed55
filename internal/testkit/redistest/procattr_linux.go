package redistest

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill a private redis-server when the test
// binary dies without running its cleanups (a panic, go test's -timeout).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
