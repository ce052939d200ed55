package bench

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// HaveWrk reports whether the wrk load tool is installed. It is leaner than
// a Go load generator, which matters on a 2-core machine where the load
// generator, the service and Redis share the CPUs.
func HaveWrk() bool {
	_, err := exec.LookPath("wrk")
	return err == nil
}

// Wrk runs wrk with a Lua script against url and parses its summary.
func Wrk(url, script string, conns int, d time.Duration) (Result, error) {
	f, err := os.CreateTemp("", "bench-*.lua")
	if err != nil {
		return Result{}, err
	}
	defer func() { Warn("remove wrk script", os.Remove(f.Name())) }()
	if _, err := f.WriteString(script); err != nil {
		return Result{}, err
	}
	if err := f.Close(); err != nil {
		return Result{}, err
	}
	out, err := exec.Command("wrk", "-t2", "-c"+strconv.Itoa(conns), "-d"+d.String(), "--latency", "-s", f.Name(), url).CombinedOutput()
	if err != nil {
		return Result{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	var r Result
	if m := regexp.MustCompile(`(\d+) requests in ([\d.]+\w+)`).FindSubmatch(out); m != nil {
		r.Ops, _ = strconv.ParseInt(string(m[1]), 10, 64)
		r.Elapsed, _ = time.ParseDuration(string(m[2]))
	}
	if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
		r.Errors, _ = strconv.ParseInt(string(m[1]), 10, 64)
		r.Ops -= r.Errors
	}
	if m := regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`).FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			n, _ := strconv.ParseInt(string(g), 10, 64)
			r.Errors += n
		}
	}
	r.P50 = wrkPercentile(out, "50%")
	r.P99 = wrkPercentile(out, "99%")
	if r.Ops == 0 || r.Elapsed == 0 {
		return r, fmt.Errorf("wrk: cannot read its summary:\n%s", out)
	}
	return r, nil
}

func wrkPercentile(out []byte, p string) time.Duration {
	m := regexp.MustCompile(`\s` + p + `\s+([\d.]+)(us|ms|s)`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	d, _ := time.ParseDuration(string(m[1]) + string(m[2]))
	return d
}
