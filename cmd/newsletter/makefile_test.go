package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeRunSaysTheFirstBuildIsSlow: `make run` says, before the build
// starts, that the first build takes a few minutes (a fresh machine
// otherwise sits silent through it). make -n lists the recipe, the
// recursive build's included, without running it.
func TestMakeRunSaysTheFirstBuildIsSlow(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on this machine")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(makePath, "-n", "--no-print-directory", "-C", root, "run", "BIN="+filepath.Join(t.TempDir(), "newsletter")).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	note, build := strings.Index(string(out), "a few minutes"), strings.Index(string(out), "go build")
	if note < 0 || build < 0 || note > build {
		t.Fatalf("make run does not say before its build that the first build takes a few minutes:\n%s", out)
	}
}
