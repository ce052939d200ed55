package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// ProcCPU is the CPU time (user + system) a process has used so far, from
// /proc/PID/stat.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are fixed: utime and stime are the 12th and 13th.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// RedisCPU is the CPU time the Redis server has used so far: from
// /proc/PID/stat when it runs on this machine, else from INFO cpu (the same
// getrusage figures, as Redis reports them).
func RedisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "server", "cpu").Result()
	if err != nil {
		return 0, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	if pid, err := strconv.Atoi(fields["process_id"]); err == nil {
		if cpu, err := ProcCPU(pid); err == nil {
			return cpu, nil
		}
	}
	user, err1 := strconv.ParseFloat(fields["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(fields["used_cpu_sys"], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("INFO cpu: %q %q", fields["used_cpu_user"], fields["used_cpu_sys"])
	}
	return time.Duration((user + sys) * float64(time.Second)), nil
}

// The bare loop's CPU is measured in a child process of its own (this
// binary again), so the sink that runs in the parent is not counted: the
// figure is what the least possible client spends per mail.
const bareChildEnv = "NEWSLETTER_BENCH_BARE_CHILD"

type bareJob struct {
	Addr     string
	Size     int
	Duration time.Duration
}

// RunBareChild runs the bare loop and exits when this process is the
// child BareLoopCPU started; otherwise it returns at once. Benchmarks call
// it first thing in main.
func RunBareChild() {
	raw := os.Getenv(bareChildEnv)
	if raw == "" {
		return
	}
	var job bareJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		fmt.Fprintln(os.Stderr, "bare child:", err)
		os.Exit(2)
	}
	io0, err := ReadProcIO(os.Getpid())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare child:", err)
		os.Exit(1)
	}
	res, err := BareLoop(job.Addr, BodyOfSize(job.Size), job.Duration)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare child:", err)
		os.Exit(1)
	}
	io1, err := ReadProcIO(os.Getpid())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare child:", err)
		os.Exit(1)
	}
	// The counters are read around the loop alone: the child's start
	// (reading its own binary, the runtime's set-up) is not a mail's.
	if err := json.NewEncoder(os.Stdout).Encode(Bare{Result: res, IO: io1.Since(io0)}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// Bare is a bare loop's run: its result, its CPU per mail, and its
// system calls and bytes over the loop (ProcIO).
type Bare struct {
	Result
	CPU time.Duration // per mail
	IO  ProcIO        // the whole loop's
}

// BareLoopCPU runs the bare SMTP loop with a body of size bytes for d in a
// child process: its result, CPU per mail and I/O counters.
func BareLoopCPU(addr string, size int, d time.Duration) (Bare, error) {
	job, err := json.Marshal(bareJob{Addr: addr, Size: size, Duration: d})
	if err != nil {
		return Bare{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return Bare{}, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), bareChildEnv+"="+string(job))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Bare{}, fmt.Errorf("bare loop: %w", err)
	}
	var b Bare
	if err := json.Unmarshal(out, &b); err != nil {
		return Bare{}, fmt.Errorf("bare loop: %w", err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || b.Ops == 0 {
		return b, fmt.Errorf("bare loop: no resource usage")
	}
	b.CPU = time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) / time.Duration(b.Ops)
	return b, nil
}

// BodyOfSize is text of about size bytes in lines like a digest's.
func BodyOfSize(size int) string {
	line := "A line of a newsletter digest, long enough to look like one.\n"
	return strings.Repeat(line, max(1, size/len(line)))
}
