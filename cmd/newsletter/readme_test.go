package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A command line that calls the binary as `newsletter …`, which `make
// build` does not put on the PATH ("command not found" to whoever types
// it); the banner's "newsletter serve listening on" is output, not a
// command.
var bareCommand = regexp.MustCompile(`^\s*(\w+=\$\()?newsletter (serve|api|worker|scheduler|bounces|import|digest|issue|token|vapid|check|healthcheck|help)\b`)

// TestDocsExamplesRunAsWritten: the examples of README.md and docs/ can be
// typed as they stand after `make build`: the binary as bin/newsletter,
// and $BASE and $T set before the first example that uses them.
func TestDocsExamplesRunAsWritten(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bareCommand.MatchString(line) && !strings.Contains(line, " listening on ") {
				t.Errorf("%s:%d: %q calls newsletter, which is not on the PATH: bin/newsletter", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"BASE", "T"} {
		set := regexp.MustCompile(`(?m)^\s*` + v + `=`).FindIndex(readme)
		// A use in an example, not the prose's `$T` that introduces it.
		use := regexp.MustCompile("(^|[^`])\\$" + v + `\b`).FindIndex(readme)
		if use != nil && (set == nil || set[0] > use[0]) {
			t.Errorf("README.md uses $%s before it sets it", v)
		}
	}
}

// TestSettingsFileIsIgnored: the settings file the README writes holds the
// secret and the admin token; a copy in the checkout is never committed.
func TestSettingsFileIsIgnored(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this machine")
	}
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, ".gitignore")); err != nil {
		t.Skip("not a checkout")
	}
	out, err := exec.Command(gitPath, "-C", root, "check-ignore", "--no-index", "newsletter.env").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "newsletter.env" {
		t.Fatalf("git check-ignore newsletter.env: %v %s: want it ignored", err, out)
	}
}
