package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// trashSnapshot is e.snapshot with the trash: what a refused trash or
// restore must leave as it was.
func (e *issueEnv) trashSnapshot(t *testing.T) string {
	t.Helper()
	// The dispatcher clears the outbox entries of the last change in the
	// background: wait for them to go, so the snapshot does not move by
	// itself between two reads (a cancel just before made it flaky).
	poll.Until(t, poll.BusyMachine, func() error {
		out, err := e.st.OutboxDue(context.Background(), time.Now().Add(24*365*time.Hour), 100)
		if err != nil || len(out) > 0 {
			return fmt.Errorf("%d outbox entries still being cleared (%v)", len(out), err)
		}
		return nil
	})
	trash, err := e.st.ListIssues(context.Background(), store.IssueTrashed, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s\ntrash %+v", e.snapshot(t), trash)
}

func (e *issueEnv) listed(t *testing.T, query string) []store.Issue {
	t.Helper()
	code, out := e.do(t, "GET", "/api/issues?"+query, "")
	var got struct{ Issues []store.Issue }
	if code != http.StatusOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("GET /api/issues?%s: %d %s", query, code, out)
	}
	return got.Issues
}

func ids(list []store.Issue) string {
	var s []string
	for _, is := range list {
		s = append(s, fmt.Sprint(is.ID))
	}
	return strings.Join(s, ",")
}

// TestIssueTrashAndRestore: DELETE moves a draft to the trash (out of
// the list, into ?trash=1), restore brings it back as it was; a
// scheduled one comes back a draft with no schedule and its plan void;
// a cancelled one, a second restore and a bad query are refused with
// nothing changed.
func TestIssueTrashAndRestore(t *testing.T) {
	e := newIssueEnv(t)
	e.readers(t, 1)
	draft := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", draft)
	if code, out := e.do(t, "DELETE", p, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, out)
	}
	if got := ids(e.listed(t, "")); got != "" {
		t.Fatalf("the list after a delete: %s", got)
	}
	if got := e.listed(t, "trash=1"); len(got) != 1 || got[0].ID != draft || got[0].TrashedFrom != store.IssueDraft || got[0].TrashedAt.IsZero() {
		t.Fatalf("the trash: %+v", got)
	}
	for query, want := range map[string]string{"trash=2": "trash: 1", "trash=1&status=draft": "not both", "status=trashed": "status: one of"} {
		before := e.trashSnapshot(t)
		if code, out := e.do(t, "GET", "/api/issues?"+query, ""); code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Fatalf("?%s: %d %s, want 400 %q", query, code, out, want)
		}
		if e.trashSnapshot(t) != before {
			t.Fatalf("?%s changed something", query)
		}
	}
	code, out := e.do(t, "POST", p+"/restore", "")
	var back store.Issue
	if code != http.StatusOK || json.Unmarshal([]byte(out), &back) != nil || back.Status != store.IssueDraft || back.Version != 1 || back.Subject != "March" {
		t.Fatalf("restore: %d %s", code, out)
	}
	before := e.trashSnapshot(t)
	if code, out := e.do(t, "POST", p+"/restore", ""); code != http.StatusConflict || !strings.Contains(out, "draft") {
		t.Fatalf("restore of a draft: %d %s", code, out)
	}
	if code, _ := e.do(t, "POST", "/api/issues/999999/restore", ""); code != http.StatusNotFound {
		t.Fatalf("restore of no issue: %d", code)
	}
	if e.trashSnapshot(t) != before {
		t.Fatal("a refused restore changed something")
	}

	// A scheduled issue: its plan is void in the trash, and it comes
	// back a draft, to be sent again by choice.
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if code, out := e.do(t, "POST", p+"/send", `{"at":"`+at.Format(time.RFC3339)+`"}`); code != http.StatusAccepted {
		t.Fatalf("send at: %d %s", code, out)
	}
	sched, _ := e.st.Issue(context.Background(), draft)
	if code, out := e.do(t, "DELETE", p, ""); code != http.StatusNoContent {
		t.Fatalf("delete a scheduled issue: %d %s", code, out)
	}
	if got, _ := e.st.Issue(context.Background(), draft); got.Status != store.IssueTrashed || got.Round != sched.Round+1 {
		t.Fatalf("a trashed scheduled issue: %+v (its plan of round %d must find its round gone)", got, sched.Round)
	}
	code, out = e.do(t, "POST", p+"/restore", "")
	if code != http.StatusOK || json.Unmarshal([]byte(out), &back) != nil || back.Status != store.IssueDraft || !back.SendAt.IsZero() {
		t.Fatalf("restore of a scheduled issue: %d %s", code, out)
	}

	if code, out := e.do(t, "POST", p+"/cancel", ""); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, out)
	}
	before = e.trashSnapshot(t)
	if code, out := e.do(t, "DELETE", p, ""); code != http.StatusConflict || !strings.Contains(out, "cancelled") {
		t.Fatalf("delete a cancelled issue: %d %s", code, out)
	}
	if e.trashSnapshot(t) != before {
		t.Fatal("a refused delete changed something")
	}
}

// TestIssueTrashPurge: an issue trashed longer than issues.TrashKept is
// gone after the next listing of the trash (the lazy purge).
func TestIssueTrashPurge(t *testing.T) {
	e := newIssueEnv(t)
	old := e.create(t, goodIssue)
	if _, err := e.st.WithClock(func() time.Time { return time.Now().Add(-issues.TrashKept - time.Minute) }).TrashIssue(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	recent := e.create(t, `{"subject":"April","body":"b","topics":["digest"]}`)
	if code, out := e.do(t, "DELETE", fmt.Sprintf("/api/issues/%d", recent), ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, out)
	}
	if got := ids(e.listed(t, "trash=1")); got != fmt.Sprint(recent) {
		t.Fatalf("the trash after the purge: %s, want only %d", got, recent)
	}
	if code, _ := e.do(t, "GET", fmt.Sprintf("/api/issues/%d", old), ""); code != http.StatusNotFound {
		t.Fatalf("the purged issue: %d", code)
	}
}

// TestIssueSearch: ?q= finds the issues with every word in their
// subject or body, the trash's with trash=1; a query too long or with
// too many words is a 400.
func TestIssueSearch(t *testing.T) {
	e := newIssueEnv(t)
	a := e.create(t, `{"subject":"Spring garden","body":"Tulips and seeds","topics":["digest"]}`)
	b := e.create(t, `{"subject":"Autumn","body":"Leaves, seeds and soup","topics":["digest"]}`)
	c := e.create(t, `{"subject":"Winter seeds","body":"Snow","topics":["digest"]}`)
	if code, out := e.do(t, "DELETE", fmt.Sprintf("/api/issues/%d", c), ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, out)
	}
	for query, want := range map[string]string{
		"q=SEEDS":                               fmt.Sprintf("%d,%d", b, a),
		"q=" + url.QueryEscape("spring tulips"): fmt.Sprint(a),
		"q=garden+soup":                         "",
		"q=seeds&trash=1":                       fmt.Sprint(c),
		"q=seeds&limit=1":                       fmt.Sprint(b),
		"q=seeds&status=sent":                   "",
	} {
		if got := ids(e.listed(t, query)); got != want {
			t.Fatalf("?%s: %q, want %q", query, got, want)
		}
	}
	for query, want := range map[string]string{
		"q=" + strings.Repeat("a", issues.MaxQuery+1):                          "at most 200 bytes",
		"q=" + strings.TrimSpace(strings.Repeat("a+", issues.MaxQueryWords+1)): "at most 8 words",
	} {
		if code, out := e.do(t, "GET", "/api/issues?"+query, ""); code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Fatalf("?%s: %d %s, want 400 %q", query[:20], code, out, want)
		}
	}
}
