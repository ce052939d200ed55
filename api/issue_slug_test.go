package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestIssueSlugChanges: PUT /api/issues/{id} moves a draft to the slug
// it names and frees the old one; a slug taken by another issue is a 409
// and a malformed one a 400 that says the form, nothing changed by
// either; a sent issue keeps its slug (409 naming its public address).
func TestIssueSlugChanges(t *testing.T) {
	e := newIssueEnv(t)
	ctx := context.Background()
	march := e.create(t, goodIssue)
	april := e.create(t, `{"subject":"April","body":"b","topics":["digest"]}`)
	put := func(id int64, slug string) (int, string) {
		t.Helper()
		return e.do(t, "PUT", fmt.Sprintf("/api/issues/%d", id), `{"subject":"April","body":"b","topics":["digest"],"slug":"`+slug+`"}`)
	}
	before := e.snapshot(t)
	if code, out := put(april, "march"); code != http.StatusConflict || !strings.Contains(out, "another issue has this slug") {
		t.Errorf("a taken slug: %d %s, want 409", code, out)
	}
	for _, bad := range []string{"Spring", "spring letter", "-spring", "späť", strings.Repeat("a", 81)} {
		if code, out := put(april, bad); code != http.StatusBadRequest || !strings.Contains(out, "lower-case letters, digits and hyphens") {
			t.Errorf("slug %q: %d %s, want 400 saying the form", bad, code, out)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused slug changed something:\nbefore %s\nafter  %s", before, after)
	}

	if code, out := put(april, "spring-letter"); code != http.StatusOK || !strings.Contains(out, `"slug":"spring-letter"`) {
		t.Fatalf("a free slug: %d %s", code, out)
	}
	if is, err := e.st.IssueBySlug(ctx, "spring-letter"); err != nil || is.ID != april {
		t.Fatalf("the new slug: %+v %v", is, err)
	}
	if _, err := e.st.IssueBySlug(ctx, "april"); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("the old slug still answers: %v", err)
	}
	// Freed: a new issue of that subject takes it as it is.
	if got, _ := e.st.CreateIssue(ctx, store.IssueContent{Subject: "April", Body: "b", Topics: []string{"digest"}}, ""); got.Slug != "april" {
		t.Fatalf("the freed slug was not free: %q", got.Slug)
	}
	// Its own slug again, or none: the slug stays.
	for _, same := range []string{"spring-letter", ""} {
		if code, out := put(april, same); code != http.StatusOK || !strings.Contains(out, `"slug":"spring-letter"`) {
			t.Fatalf("slug %q: %d %s", same, code, out)
		}
	}

	if _, err := e.st.TransitionIssue(ctx, march, []string{store.IssueDraft}, store.IssueSent, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	before = e.snapshot(t)
	if code, out := put(march, "march-2026"); code != http.StatusConflict || !strings.Contains(out, "/archive/march is a public address") {
		t.Errorf("a sent issue's slug: %d %s, want 409 naming its address", code, out)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused slug of a sent issue changed something:\nbefore %s\nafter  %s", before, after)
	}
}
