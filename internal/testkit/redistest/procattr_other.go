//go:build !linux

package redistest

import "os/exec"

// setProcAttr does nothing where there is no Pdeathsig: a private
// redis-server outlives a test binary that dies without running its
// cleanups.
func setProcAttr(*exec.Cmd) {}
