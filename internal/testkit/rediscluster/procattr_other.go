//go:build !linux

package rediscluster

import "os/exec"

// setProcAttr does nothing where there is no Pdeathsig: a node outlives a
// test binary that dies without running its cleanups.
func setProcAttr(*exec.Cmd) {}
