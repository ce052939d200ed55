package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// A Child is a sender run in a child process (this binary again), so its
// CPU is measured apart from the fakes and the harness in the parent. The
// protocol on its stdin and stdout, line by line: the child sets itself
// up and says "ready"; the parent reads the child's CPU and writes "go";
// the child runs and, if it ends on its own, says "done" and a JSON
// result; it stops when its stdin closes.
type Child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	cpu0  time.Duration
	start time.Time
}

// StartChild starts this binary again with env set to job as JSON, and
// waits until it is ready.
func StartChild(env string, job any) (*Child, error) {
	raw, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		c.Close()
		return nil, fmt.Errorf("child: %q instead of ready (%v)", line, err)
	}
	return c, nil
}

// Go tells the child to start, from here its CPU and time are counted.
func (c *Child) Go() error {
	cpu, err := ProcCPU(c.cmd.Process.Pid)
	if err != nil {
		return err
	}
	c.cpu0, c.start = cpu, time.Now()
	_, err = io.WriteString(c.in, "go\n")
	return err
}

// Done waits for the child's "done" line and decodes its result into v.
func (c *Child) Done(v any) error {
	line, err := c.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("child: %w", err)
	}
	raw, ok := strings.CutPrefix(line, "done ")
	if !ok {
		return fmt.Errorf("child: %q instead of done", line)
	}
	return json.Unmarshal([]byte(raw), v)
}

// Since is the time and the child's CPU since Go.
func (c *Child) Since() (time.Duration, time.Duration, error) {
	elapsed := time.Since(c.start)
	cpu, err := ProcCPU(c.cmd.Process.Pid)
	return elapsed, cpu - c.cpu0, err
}

// Close stops the child (its stdin closes) and waits for it.
func (c *Child) Close() {
	Warn("close the child's stdin", c.in.Close())
	Warn("child", c.cmd.Wait())
}

// ChildJob is, in the child, the job the parent gave (false when this
// process is not a child).
func ChildJob(env string, job any) (bool, error) {
	raw := os.Getenv(env)
	if raw == "" {
		return false, nil
	}
	return true, json.Unmarshal([]byte(raw), job)
}

// ChildRun is the child's side: it says ready, waits for go, runs run,
// reports its result (when it returns one: a sender that ends on its own),
// and waits for its stdin to close.
func ChildRun(run func() (any, error)) error {
	in := bufio.NewReader(os.Stdin)
	if _, err := fmt.Println("ready"); err != nil {
		return err
	}
	if line, err := in.ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("child: %q instead of go (%v)", line, err)
	}
	res, err := run()
	if err != nil {
		return err
	}
	if res != nil {
		raw, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if _, err := fmt.Printf("done %s\n", raw); err != nil {
			return err
		}
	}
	_, err = io.Copy(io.Discard, in) // until the parent closes stdin
	return err
}

// Pid is the child's process id (its memory read from /proc).
func (c *Child) Pid() int { return c.cmd.Process.Pid }
