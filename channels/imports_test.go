package channels_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestChannelsArePeers holds the channels to their import rule (package
// documentation): a channel imports the seam (channels), the leaves under
// internal/ and modules, never the store, the tasks, the mailer, the
// services, the worker or the API. A channel that needs something of
// theirs declares the small interface or struct it needs, and the worker
// supplies it.
func TestChannelsArePeers(t *testing.T) {
	const mod = "github.com/newsletter/newsletter/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"channels/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			rest, ours := strings.CutPrefix(imp, mod)
			if !ours || rest == "channels" || strings.HasPrefix(rest, "channels/") || strings.HasPrefix(rest, "internal/") {
				continue
			}
			t.Errorf("%s imports %s", fields[0], imp)
		}
	}
}
