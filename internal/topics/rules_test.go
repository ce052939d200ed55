package topics

import (
	"strings"
	"testing"
	"time"
)

// A topics file is held to what a console or API save is (Validate):
// otherwise a file accepted at the first import would make every later
// save refused until its topic was rewritten.
func TestFileHeldToTheSaveRules(t *testing.T) {
	long := strings.Repeat("x", MaxTopicDescription+1)
	_, err := Parse([]byte("topics:\n- {id: digest, name: Weekly digest, default: true, description: "+long+"}\n- {id: updates, name: Updates, default: true}\n"), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "description") {
		t.Fatalf("a description over %d characters: %v, want refused", MaxTopicDescription, err)
	}
}
