package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
)

// `make bench-issue` (ISSUE=1) also sends one issue, written in
// Markdown, to the digest's readers through the same worker, after the
// digest(s): its figures sit beside the digest's of the same run. The
// issue goes the way a publisher sends it, with `newsletter issue create`
// and `newsletter issue send`; the worker's
// newsletter_issue_renders_total says how often its Markdown was
// rendered.

// issueMarkdown is a letter about the size of the 20-item digest: a
// heading, and per item a subheading, a sentence and a link.
func issueMarkdown(items int) string {
	var b strings.Builder
	b.WriteString("# This week\n\nWhat the benchmark sends, written as a letter.\n\n")
	for i := 1; i <= items; i++ {
		fmt.Fprintf(&b, "## Benchmark item %d\n\nWhat the benchmark sends, with **some** emphasis. [Read more](https://example.com/bench/%d)\n\n", i, i)
	}
	return b.String()
}

// sendIssue creates an issue to the digest topic and measures its
// sending to its n readers.
func sendIssue(ctx context.Context, bin, dir string, env []string, rdb *redis.Client, sink *bench.Sink, w *worker, n, items int) (figures, error) {
	f := figures{issue: true, items: items}
	md := filepath.Join(dir, "issue.md")
	if err := os.WriteFile(md, []byte(issueMarkdown(items)), 0o644); err != nil {
		return f, err
	}
	create := exec.Command(bin, "issue", "create", "--subject", "The benchmark letter", "--topic", "digest", md)
	create.Env = env
	out, err := create.Output()
	if err != nil {
		return f, fmt.Errorf("issue create: %w", exitText(err))
	}
	id := strings.TrimSpace(string(out))
	renders0, err := issueRenders("http://" + w.addr)
	if err != nil {
		return f, err
	}
	err = measure(ctx, rdb, sink, w, n, &f, func() error {
		send := exec.Command(bin, "issue", "send", id)
		send.Env = env
		if out, err := send.CombinedOutput(); err != nil {
			return fmt.Errorf("issue send: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	renders1, err := issueRenders("http://" + w.addr)
	if err != nil {
		return f, err
	}
	f.renders = renders1 - renders0
	fmt.Printf("issue (%.1f KB Markdown): %.0f mails/s, wall %s, %.1f KB a mail; bare loop at that size %s; Markdown rendered %v time(s)\n",
		float64(len(issueMarkdown(items)))/1000, f.rate, f.wall.Round(time.Millisecond), f.mailSize/1000, f.bare, f.renders)
	return f, nil
}

// issueRenders reads newsletter_issue_renders_total from the worker's
// /metrics.
func issueRenders(base string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { bench.Warn("close metrics", resp.Body.Close()) }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "newsletter_issue_renders_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("the worker's /metrics has no newsletter_issue_renders_total")
}

// exitText adds a failed command's stderr to its error.
func exitText(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%v\n%s", err, ee.Stderr)
	}
	return err
}
