//go:build unix

package inbox

import "syscall"

// openFiles is how many files the process may have open (0: unknown).
// Go raises the soft limit to the hard one when it starts.
func openFiles() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
