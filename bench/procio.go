package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ProcIO is a process's own count of the system calls that read and
// write (any file or socket: read, readv, recvfrom, write, writev,
// sendto …) and the bytes they moved, from /proc/<pid>/io, summed over
// its threads by the kernel. It leaves out the calls that move no data
// (epoll_wait, futex, the scheduler's), which no counter of the process
// shows without tracing it.
type ProcIO struct {
	ReadCalls, WriteCalls int64
	ReadBytes, WriteBytes int64
}

// ReadProcIO reads pid's counters (os.Getpid() for this process's own).
func ReadProcIO(pid int) (ProcIO, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return ProcIO{}, fmt.Errorf("system call counters (Linux's /proc/<pid>/io): %w", err)
	}
	var p ProcIO
	fields := map[string]*int64{"syscr": &p.ReadCalls, "syscw": &p.WriteCalls, "rchar": &p.ReadBytes, "wchar": &p.WriteBytes}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	found := 0
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		if dst := fields[string(name)]; ok && dst != nil {
			if *dst, err = strconv.ParseInt(string(value), 10, 64); err != nil {
				return ProcIO{}, fmt.Errorf("/proc/%d/io: %s: %w", pid, name, err)
			}
			found++
		}
	}
	if found != len(fields) {
		return ProcIO{}, fmt.Errorf("/proc/%d/io: %d of its %d counters found", pid, found, len(fields))
	}
	return p, nil
}

// Since is what was counted between before and p.
func (p ProcIO) Since(before ProcIO) ProcIO {
	return ProcIO{ReadCalls: p.ReadCalls - before.ReadCalls, WriteCalls: p.WriteCalls - before.WriteCalls,
		ReadBytes: p.ReadBytes - before.ReadBytes, WriteBytes: p.WriteBytes - before.WriteBytes}
}

// PerOp divides each count by n operations (n > 0), as floats.
func (p ProcIO) PerOp(n int64) (readCalls, writeCalls, writeBytes float64) {
	if n <= 0 {
		return 0, 0, 0
	}
	f := float64(n)
	return float64(p.ReadCalls) / f, float64(p.WriteCalls) / f, float64(p.WriteBytes) / f
}
