//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill a child (a role, a redis-server) when
// the soak dies without its clean-up (a panic, a kill -9 of make), so
// nothing of a run outlives it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
