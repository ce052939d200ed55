package logredact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestNoAddressInTheLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil))).With("who", "Ann@Example.com")
	log.Info("task welcome:ann@example.com done", "id", "confirm:o'neil+x@sub.example.org",
		"err", errors.New("subscribe ann@example.com: redis down"), slog.Group("g", "to", "bob@example.net"))
	out := buf.String()
	for _, leak := range []string{"ann@", "Ann@", "neil+x@", "bob@"} {
		if strings.Contains(out, leak) {
			t.Fatalf("an address reached the log: %s", out)
		}
	}
	p := Pseudonym("ann@example.com")
	if !strings.HasPrefix(p, "example.com#") || strings.Count(out, p) != 3 {
		t.Fatalf("want the same pseudonym %s three times (one person, three mentions): %s", p, out)
	}
	if Redact("no address here, 10:00 @noon") != "no address here, 10:00 @noon" {
		t.Fatal("text without an address changed")
	}
}
