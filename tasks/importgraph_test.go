package tasks_test

import (
	"os/exec"
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
