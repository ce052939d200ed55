package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// A command line that calls the binary as `newsletter …`, which `make
// build` does not put on the PATH ("command not found" to whoever types
// it); the banner's "newsletter serve listening on" is output, not a
// command.
var bareCommand = regexp.MustCompile(`^\s*(\w+=\$\()?newsletter (serve|api|worker|scheduler|bounces|import|digest|issue|token|account|vapid|check|healthcheck|help)\b`)

// TestDocsExamplesRunAsWritten: the examples of README.md and docs/ can be
// typed as they stand after `make build`: the binary as bin/newsletter,
// and $BASE and $T set before the first example that uses them, or, in a
// guide other than the one that sets them, a link to where they are set
// before that first use.
func TestDocsExamplesRunAsWritten(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	texts := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = b
		for i, line := range strings.Split(string(b), "\n") {
			if bareCommand.MatchString(line) && !strings.Contains(line, " listening on ") {
				t.Errorf("%s:%d: %q calls newsletter, which is not on the PATH: bin/newsletter", filepath.Base(f), i+1, strings.TrimSpace(line))
			}
		}
	}
	for _, v := range []string{"BASE", "T"} {
		setRe := regexp.MustCompile(`(?m)^\s*` + v + `=`)
		// A use in an example, not the prose's `$T` that introduces it.
		useRe := regexp.MustCompile("(^|[^`])\\$" + v + `\b`)
		setter, anchor := "", ""
		for _, f := range files {
			if loc := setRe.FindIndex(texts[f]); loc != nil {
				if setter != "" {
					t.Errorf("$%s is set in %s and in %s: set it in one place and link to it", v, filepath.Base(setter), filepath.Base(f))
					continue
				}
				setter, anchor = f, headingAnchorBefore(texts[f], loc[0])
			}
		}
		for _, f := range files {
			use := useRe.FindIndex(texts[f])
			if use == nil {
				continue
			}
			if set := setRe.FindIndex(texts[f]); set != nil && set[0] < use[0] {
				continue
			}
			if setter == "" || setter == f {
				t.Errorf("%s uses $%s before it sets it", filepath.Base(f), v)
				continue
			}
			rel, err := filepath.Rel(filepath.Dir(f), setter)
			if err != nil {
				t.Fatal(err)
			}
			link := "](" + filepath.ToSlash(rel) + "#" + anchor + ")"
			if i := bytes.Index(texts[f], []byte(link)); i < 0 || i > use[0] {
				t.Errorf("%s uses $%s before it sets it or links to where it is set (%s)", filepath.Base(f), v, link[2:len(link)-1])
			}
		}
	}
}

// headingAnchorBefore is the anchor GitHub gives the last heading before
// offset in a Markdown text: lower case, punctuation dropped, spaces as
// hyphens. Lines in fenced code blocks (shell comments) are not headings.
func headingAnchorBefore(text []byte, offset int) string {
	anchor, fenced := "", false
	for _, line := range strings.SplitAfter(string(text[:offset]), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(line, "#"):
			title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
			anchor = strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					return r
				}
				return -1
			}, title)
		}
	}
	return anchor
}

// TestSettingsFileIsIgnored: the settings file docs/operating.md writes holds the
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
