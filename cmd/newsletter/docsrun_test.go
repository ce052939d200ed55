package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// A docs shell block is a fence whose info string is a shell's. The line
// right before it says what the tests do with it (docs/development.md,
// "The guides' commands"):
//
//	<!-- run: local -->            run against the service the test starts
//	<!-- run: skip (needs DNS) --> not run; the reason is printed
var (
	shellFence = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
	runMark    = regexp.MustCompile(`^<!-- run: (local|skip \((.+)\)) -->$`)
	// A command in an indented code block escapes the marks: it must be a
	// fenced block.
	indentedCommand = regexp.MustCompile(`^    (curl |bin/newsletter |make |go test |[A-Z_]+=\S* (bin/|make |go |curl ))`)
)

// docsAdminToken is the admin token the README's banner shows, so its
// quick start's `TOKEN=…` line runs as it is printed.
const docsAdminToken = "d7b6b52030b14d36467f05ec55828917"

// docsBase is the address the guides' examples call; the runner puts
// the test service's in its place.
const docsBase = "http://localhost:8080"

// docsBlock is a shell block of a guide and its mark.
type docsBlock struct {
	file       string // as README.md or docs/x.md
	line       int    // of the opening fence
	text, skip string // skip: the reason, "" to run it
}

// docsBlocks reads every shell block of README.md and docs/*.md with its
// mark; a block without one, a mark it cannot read and a command in an
// indented block are errors.
func docsBlocks(root string) ([]docsBlock, []string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, nil, err
	}
	var blocks []docsBlock
	var problems []string
	for _, f := range append([]string{filepath.Join(root, "README.md")}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		name, _ := filepath.Rel(root, f)
		b, p := fileBlocks(name, strings.Split(string(raw), "\n"))
		blocks, problems = append(blocks, b...), append(problems, p...)
	}
	return blocks, problems, nil
}

func fileBlocks(name string, lines []string) (blocks []docsBlock, problems []string) {
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if indentedCommand.MatchString(line) {
			problems = append(problems, fmt.Sprintf("%s:%d: a command in an indented block: write it in a ```sh fence with a run mark", name, i+1))
		}
		if !strings.HasPrefix(line, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if shellFence.MatchString(line) {
			b := docsBlock{file: name, line: i + 1, text: strings.Join(lines[i+1:min(end, len(lines))], "\n")}
			mark := ""
			if i > 0 {
				mark = strings.TrimSpace(lines[i-1])
			}
			switch m := runMark.FindStringSubmatch(mark); {
			case m == nil:
				problems = append(problems, fmt.Sprintf("%s:%d: a shell block without a mark on the line before it: <!-- run: local --> or <!-- run: skip (why) --> (docs/development.md)", name, i+1))
			default:
				b.skip = m[2]
				blocks = append(blocks, b)
			}
		}
		i = end
	}
	return blocks, problems
}

// TestDocsShellBlocksRun runs the guides' shell blocks marked `run: local`
// with bash -euo pipefail, file by file, each file against a service of
// its own (`newsletter serve` on the test Redis, mail into a local SMTP
// sink) with three active readers of both topics (ann@example.com tagged
// beta, bob@example.com beta and paid, cy@example.com) and
// me@example.com allowed test sends (NEWSLETTER_TEST_RECIPIENTS). The blocks find what the guides assume set: $BASE and $T (the
// publishing guide's), $TOKEN and $NEWSLETTER_ADMIN_TOKEN (the admin
// token, the one the README's banner shows), the banner's `export` line
// (NEWSLETTER_REDIS_URL, NEWSLETTER_SECRET), bin/newsletter (this test
// binary, as the newsletter command) and issues/2026-03.md in the
// working directory. http://localhost:8080 in a block is the service's
// address, and curl fails on an HTTP error (--fail-with-body), so a
// renamed route, flag or field fails the test with the file, line and
// output.
func TestDocsShellBlocksRun(t *testing.T) {
	// Each file's blocks run on a Redis and a service of their own
	// (redistest.Own): nothing here need hold up the package's other
	// tests, which start only once the sequential ones are done. The
	// subtests take the parallel slots (takeSlot); this parent, which
	// only waits for them, takes none.
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine: the guides' API examples call it")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	blocks, problems, err := docsBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	byFile := map[string][]docsBlock{}
	var order []string
	for _, b := range blocks {
		if b.skip != "" {
			t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) { t.Skip(b.skip) })
			continue
		}
		if byFile[b.file] == nil {
			order = append(order, b.file)
		}
		byFile[b.file] = append(byFile[b.file], b)
	}
	for _, file := range order {
		t.Run(file, func(t *testing.T) {
			env, dir := docsService(t)
			for _, b := range byFile[file] {
				script := "curl() { command curl --fail-with-body --silent --show-error \"$@\"; }\n" +
					strings.ReplaceAll(b.text, docsBase, envValue(env, "BASE"))
				ctx, cancel := context.WithTimeout(context.Background(), poll.BusyMachine)
				cmd := exec.CommandContext(ctx, bash, "-euo", "pipefail", "-c", script)
				cmd.Env, cmd.Dir = env, dir
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Errorf("%s:%d: the block failed: %v\n--- block\n%s\n--- output\n%s", b.file, b.line, err, b.text, out)
				}
			}
		})
	}
}

// docsService starts the service a guide's blocks run against and
// returns their environment and working directory.
func docsService(t *testing.T) ([]string, string) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	st := versionedStore(t, rdb)
	for e, tags := range map[string][]string{"ann@example.com": {"beta"}, "bob@example.com": {"beta", "paid"}, "cy@example.com": nil} {
		req := store.SubscribeRequest{Email: e, Activate: true, Topics: []string{topics.Digest, topics.Updates}, Tags: tags}
		if _, err := st.Subscribe(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	smtpSrv := smtptest.Start(t)
	svcEnv := realEnv(redisURL, smtpSrv.URL(), map[string]string{"NEWSLETTER_ADMIN_TOKEN": docsAdminToken, "NEWSLETTER_TEST_RECIPIENTS": "me@example.com"})
	svc := startService(t, svcEnv, "serve")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nNEWSLETTER_TEST_ARGV=1 exec '%s' \"$@\"\n", os.Args[0])
	if err := os.WriteFile(filepath.Join(dir, "bin", "newsletter"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "issues"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "issues", "2026-03.md"), []byte(docsIssue), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEWSLETTER_") {
			env = append(env, kv)
		}
	}
	for k, v := range svcEnv {
		env = append(env, k+"="+v)
	}
	return append(env, "BASE="+svc.base, "T="+docsAdminToken, "TOKEN="+docsAdminToken), dir
}

// docsIssue is the issue file the publishing guide's CLI example sends
// (issues/2026-03.md, in the working directory).
const docsIssue = "## Spring is here\n\nThe March letter: what changed, and a [link](https://example.com/march).\n"

// envValue is name's value in env.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestDocsBlockMarks: the marks are read as docs/development.md says: a
// block runs or is skipped with its reason; a shell block without a mark
// and a command in an indented block are refused; other fences are not
// shell blocks.
func TestDocsBlockMarks(t *testing.T) {
	text := "intro\n\n<!-- run: local -->\n```sh\ncurl $BASE/healthz\n```\n\n" +
		"<!-- run: skip (needs DNS) -->\n```bash\ndig example.com\n```\n\n" +
		"```sh\nbin/newsletter help\n```\n\n" +
		"```yaml\ntopics: []\n```\n\n" +
		"    curl $BASE/api/issues\n"
	blocks, problems := fileBlocks("x.md", strings.Split(text, "\n"))
	if len(blocks) != 2 || blocks[0].line != 4 || blocks[0].skip != "" || blocks[0].text != "curl $BASE/healthz" ||
		blocks[1].line != 9 || blocks[1].skip != "needs DNS" {
		t.Errorf("blocks: %+v", blocks)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "x.md:13: a shell block without a mark") ||
		!strings.Contains(problems[1], "x.md:21: a command in an indented block") {
		t.Errorf("problems: %q", problems)
	}
}
