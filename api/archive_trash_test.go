package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/api"
)

// TestArchiveLeavesOutTrashedIssues: a sent issue moved to the trash
// leaves the archive's list, its page and its feed within the cache's
// recheck interval (the generation grows), and is back in all three after a
// restore, at the same address.
func TestArchiveLeavesOutTrashedIssues(t *testing.T) {
	e := newArchiveEnv(t)
	is := e.publish(t, "Trashed letter", "Soon gone", true, "digest")
	ctx := context.Background()
	in := func() (list, page, feed bool) {
		e.clock.Add(api.DefaultArchiveRecheck) // the cache reads the generation once per interval
		_, body := get(t, e.srv.URL+"/archive")
		resp, _ := get(t, e.srv.URL+"/archive/"+is.Slug)
		_, atom := get(t, e.srv.URL+"/archive/feed.atom")
		return strings.Contains(body, "Trashed letter"), resp.StatusCode == http.StatusOK, strings.Contains(atom, "Trashed letter")
	}
	if l, p, f := in(); !l || !p || !f {
		t.Fatalf("a sent issue in the archive: list %v page %v feed %v", l, p, f)
	}
	if _, err := e.st.TrashIssue(ctx, is.ID); err != nil {
		t.Fatal(err)
	}
	if l, p, f := in(); l || p || f {
		t.Fatalf("a trashed issue in the archive: list %v page %v feed %v", l, p, f)
	}
	if _, err := e.st.RestoreIssue(ctx, is.ID); err != nil {
		t.Fatal(err)
	}
	if l, p, f := in(); !l || !p || !f {
		t.Fatalf("a restored issue in the archive: list %v page %v feed %v", l, p, f)
	}
}
