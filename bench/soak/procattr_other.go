//go:build !linux

package main

import "os/exec"

// setProcAttr: only Linux kills a child with its parent.
func setProcAttr(*exec.Cmd) {}
