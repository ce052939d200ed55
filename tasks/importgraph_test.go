package tasks_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// deps lists the import paths pkg depends on, transitively, with the
// packages that import each, from the go tool itself.
func deps(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	importers := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		importers[fields[0]] = append(importers[fields[0]], []string{}...)
		for _, imp := range fields[1:] {
			importers[imp] = append(importers[imp], fields[0])
		}
	}
	return importers
}

// TestLayering holds the packages to their allowed imports
// (docs/architecture.md): the API enqueues and never sends mail, and the
// task vocabulary depends on asynq and the store, nothing of the worker.
func TestLayering(t *testing.T) {
	const mod = "github.com/newsletter/newsletter/"
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{mod + "api", []string{mod + "mailer", "github.com/wneessen/go-mail", mod + "worker", mod + "worker/schedule", mod + "internal/config", mod + "internal/pace"}},
		{mod + "tasks", []string{mod + "mailer", "github.com/wneessen/go-mail", mod + "worker", mod + "api", mod + "internal/config"}},
		{mod + "mailer", []string{mod + "store", mod + "tasks", mod + "internal/config"}},
		{mod + "store", []string{mod + "tasks", mod + "mailer", mod + "internal/config"}},
		{mod + "worker", []string{mod + "api", mod + "internal/config"}},
		{mod + "services/engage", []string{mod + "mailer", "github.com/wneessen/go-mail", mod + "worker", mod + "api", mod + "internal/config"}},
		{mod + "services/settings", []string{mod + "mailer", mod + "tasks", mod + "api", mod + "internal/config"}},
	} {
		got := deps(t, c.pkg)
		for _, f := range c.forbidden {
			if importers, ok := got[f]; ok {
				t.Errorf("%s depends on %s (imported by %v)", c.pkg, f, importers)
			}
		}
	}
	// asynq itself imports robfig/cron for its own Scheduler; none of our
	// packages that the API depends on may.
	for _, importer := range deps(t, mod+"api")["github.com/robfig/cron/v3"] {
		if strings.HasPrefix(importer, mod) {
			t.Errorf("api reaches cron through %s", importer)
		}
	}
}

// TestConfigOnlyInCommand: internal/config reads the environment for the
// binary; the packages it configures take their own typed values.
func TestConfigOnlyInCommand(t *testing.T) {
	const mod = "github.com/newsletter/newsletter/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if imp == mod+"internal/config" && fields[0] != mod+"cmd/newsletter" {
				t.Errorf("%s imports internal/config", fields[0])
			}
		}
	}
}

// folderOf is the top-level folder of a package of the module, with every
// package under internal/ counted as the one folder "internal".
func folderOf(pkg string) string {
	const mod = "github.com/newsletter/newsletter/"
	rest := strings.TrimPrefix(pkg, mod)
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// allowedFolders is the house as docs/architecture.md draws it: which
// top-level folder the binary's code may import from which. The web
// packages, the worker and the commands sit over services, channels
// and the store; channels are peers that import only the seam and leaf
// helpers; internal/ imports nothing of the project's.
var allowedFolders = map[string][]string{
	"cmd":      {"api", "channels", "internal", "mailer", "services", "store", "tasks", "worker"},
	"api":      {"internal", "services", "store", "tasks"},
	"worker":   {"channels", "internal", "mailer", "services", "store", "tasks"},
	"services": {"internal", "store", "tasks"},
	"tasks":    {"internal"},
	"channels": {"internal"},
	"mailer":   {"internal"},
	"store":    {"internal"},
	"internal": {},
}

// TestFolderGraph holds the production import graph of the top-level
// folders to allowedFolders (25 directed edges), no two folders
// importing each other, and nothing of a test (a fake, a benchmark)
// linked into the binary.
func TestFolderGraph(t *testing.T) {
	const mod = "github.com/newsletter/newsletter/"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"cmd/newsletter").Output()
	if err != nil {
		t.Fatal(err)
	}
	edges := map[[2]string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if !strings.HasPrefix(fields[0], mod) {
			continue
		}
		if strings.Contains(fields[0], "test") || strings.HasPrefix(fields[0], mod+"bench") {
			t.Errorf("the binary links %s, a package for tests or benchmarks", fields[0])
		}
		from := folderOf(fields[0])
		for _, imp := range fields[1:] {
			if to := folderOf(imp); strings.HasPrefix(imp, mod) && to != from {
				edges[[2]string{from, to}] = fields[0] + " → " + imp
			}
		}
	}
	for e, example := range edges {
		if !slices.Contains(allowedFolders[e[0]], e[1]) {
			t.Errorf("%s imports %s (%s): not in the house's plan", e[0], e[1], example)
		}
		if _, back := edges[[2]string{e[1], e[0]}]; back && e[0] < e[1] {
			t.Errorf("%s and %s import each other", e[0], e[1])
		}
	}
}
