package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestArchiveSlugMovesOnlyBeforeTheSend: a draft moved to a new slug is
// published under that one, its old address never answers; once sent,
// the slug cannot move (a *StateError) and the archive address stays.
func TestArchiveSlugMovesOnlyBeforeTheSend(t *testing.T) {
	e := newArchiveEnv(t)
	ctx := context.Background()
	draft := e.publish(t, "First letter", "Hello", false, "digest")
	if _, err := e.st.UpdateIssueSlug(ctx, draft.ID, 1, draft.IssueContent, "welcome"); err != nil {
		t.Fatal(err)
	}
	sendAsIs(t, e, draft.ID)
	if resp, body := get(t, e.srv.URL+"/archive/welcome"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new address: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, e.srv.URL+"/archive/first-letter"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the draft's old address: %d, want 404", resp.StatusCode)
	}

	is, err := e.st.Issue(ctx, draft.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.UpdateIssueSlug(ctx, is.ID, is.Version, is.IssueContent, "renamed"); !errors.Is(err, store.ErrIssueState) {
		t.Fatalf("a sent issue's slug moved: %v", err)
	}
	if resp, body := get(t, e.srv.URL+"/archive/welcome"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the sent issue's address after a refused move: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, e.srv.URL+"/archive/renamed"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the refused slug answers: %d", resp.StatusCode)
	}
}

// sendAsIs takes a draft through sending to sent, as publish does.
func sendAsIs(t *testing.T, e *archiveEnv, id int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.st.TransitionIssue(ctx, id, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AdvanceIssuePlan(ctx, id, 1, store.WalkByID, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if done, err := e.st.FinishIssue(ctx, id); err != nil || !done {
		t.Fatalf("finish %d: %v %v", id, done, err)
	}
}
