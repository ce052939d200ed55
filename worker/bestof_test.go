package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// TestBestOfListsTheLatestDigest: the week-one step shows what it
// announces, the items of the latest digest; before any digest it
// announces none.
func TestBestOfListsTheLatestDigest(t *testing.T) {
	steps := "  - {template: welcome, after: 1h}\n  - {template: best-of, after: 168h}\n"
	for _, withDigest := range []bool{true, false} {
		e := newSequenceEnv(t, sequenceSet(t, steps), nil)
		ctx := context.Background()
		if withDigest {
			for _, it := range []store.Item{
				{Title: "Release 2.0", URL: "https://news.example.com/2", Summary: "What changed"},
				{Title: "A talk", URL: "https://news.example.com/talk"},
			} {
				if _, err := e.st.AddItem(ctx, it); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := e.st.StartDigestRun(ctx, "2026-W50"); err != nil {
				t.Fatal(err)
			}
		}
		e.now = confirmed.Add(time.Hour)
		if err := e.run(t, ""); err != nil {
			t.Fatal(err)
		}
		e.now = confirmed.Add(168 * time.Hour)
		if err := e.run(t, "best-of"); err != nil {
			t.Fatal(err)
		}
		if e.rec.count() != 2 {
			t.Fatalf("sent %v", e.subjects())
		}
		m := e.rec.sent[1]
		for _, part := range []string{m.Text, m.HTML} {
			listed := containsAll(part, "Release 2.0", "https://news.example.com/2", "What changed", "A talk")
			if withDigest && (!listed || strings.Index(part, "Release 2.0") > strings.Index(part, "A talk")) {
				t.Errorf("best-of does not list the latest digest's items in order:\n%s", part)
			}
			if !withDigest && (strings.Contains(part, "here is") || strings.Contains(part, "latest digest")) {
				t.Errorf("best-of before any digest announces items:\n%s", part)
			}
		}
		// The welcome lists nothing and reads no items.
		if strings.Contains(e.rec.sent[0].Text, "Release 2.0") {
			t.Errorf("the welcome lists items:\n%s", e.rec.sent[0].Text)
		}
	}
}
