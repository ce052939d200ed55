package console_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// TestConsoleTrashUndoAndRestore: a delete asks first (a page that says
// where the issue goes), moves it to the trash, and the list it leads
// to offers Undo (a POST form); the Trash view lists it with Restore; a
// scheduled issue comes back a draft and the notice says so; a restore
// of an issue not in the trash is refused with nothing changed.
func TestConsoleTrashUndoAndRestore(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	ctx := t.Context()
	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "Harvest notes", Body: "Pumpkins", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/admin/issues/%d", is.ID)
	mustContain(t, "the confirm page", b.get(path+"/delete"), "Move “Harvest notes” to the trash?", "kept 30 days", `action="`+path+`/delete"`, "No, go back")
	if got, _ := e.st.Issue(ctx, is.ID); got.Status != store.IssueDraft {
		t.Fatalf("the confirm page changed the issue: %+v", got)
	}
	p := b.post(path+"/delete", nil)
	if p.code != 303 || p.location != fmt.Sprintf("/admin/issues?undo=%d&done=trashed", is.ID) {
		t.Fatalf("delete: %d %q", p.code, p.location)
	}
	list := b.get(p.location)
	mustContain(t, "the list after a delete", list, "Moved to trash", `action="`+path+`/restore"`, ">Undo<")
	if strings.Contains(list.body, ">Harvest notes<") {
		t.Fatal("the list shows the trashed issue")
	}
	if p := b.post(path+"/restore", nil); p.code != 303 || !strings.HasSuffix(p.location, "done=untrashed") {
		t.Fatalf("undo: %d %q", p.code, p.location)
	}
	if got, _ := e.st.Issue(ctx, is.ID); got.Status != store.IssueDraft || got.Version != is.Version {
		t.Fatalf("undone: %+v", got)
	}
	before, _ := e.st.Issue(ctx, is.ID)
	if p := b.post(path+"/restore", nil); p.code != 409 || !strings.Contains(p.body, "not in the trash") {
		t.Fatalf("restore a draft: %d", p.code)
	}
	if got, _ := e.st.Issue(ctx, is.ID); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a refused restore changed the issue: %+v", got)
	}

	// A scheduled one: the confirm page says it will not be sent, the
	// trash lists it, and it comes back a draft.
	if _, err := e.st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueScheduled,
		store.IssueChange{SetSchedule: true, SendAt: e.clock.Now().Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the confirm page of a scheduled issue", b.get(path+"/delete"), "it will not be sent", "back as a draft")
	if p := b.post(path+"/delete", nil); p.code != 303 {
		t.Fatalf("delete a scheduled issue: %d", p.code)
	}
	mustContain(t, "the trash", b.get("/admin/issues?trash=1"), "<h1>Trash</h1>", "Harvest notes", "was scheduled", `action="`+path+`/restore"`, "30 days")
	mustContain(t, "a search of the trash", b.get("/admin/issues?trash=1&q=pumpkins"), "Harvest notes")
	if p := b.post(path+"/restore", nil); p.code != 303 || !strings.HasSuffix(p.location, "done=untrashed-draft") {
		t.Fatalf("restore: %d %q", p.code, p.location)
	}
	mustContain(t, "restored", b.get(path+"?done=untrashed-draft"), "Restored from the trash as a draft")
	if got, _ := e.st.Issue(ctx, is.ID); got.Status != store.IssueDraft || !got.SendAt.IsZero() {
		t.Fatalf("a scheduled issue restored: %+v", got)
	}
	mustContain(t, "an empty trash", b.get("/admin/issues?trash=1"), "The trash is empty.")
}

// TestConsoleConfirmsCancelAndSend: a cancel asks first on a page of its
// own; a send must choose when (no default "now") and goes through a
// review page that says to how many readers and when, changing nothing;
// its button posts the same fields and sends.
func TestConsoleConfirmsCancelAndSend(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: "r@example.com", Topics: []string{"digest"}, Activate: true}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn(t, editorToken)
	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "Frost", Body: "Cold", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/admin/issues/%d", is.ID)
	page := b.get(path)
	mustContain(t, "the issue page", page, `href="`+path+`/cancel"`, `action="`+path+`/send/review"`, `value="now" required>`)
	if strings.Contains(page.body, `value="now" checked`) {
		t.Fatal("the send form still chooses now by default")
	}
	mustContain(t, "the cancel page", b.get(path+"/cancel"), "Cancel “Frost”?", "stays cancelled", `action="`+path+`/cancel"`)
	if p := b.post(path+"/send/review", url.Values{"version": {"1"}}); p.code != 400 || !strings.Contains(p.body, "choose now, a time, or a local hour") {
		t.Fatalf("a send with no when: %d", p.code)
	}
	if p := b.post(path+"/send", url.Values{"version": {"1"}, "audience": {"1"}}); p.code != 400 {
		t.Fatalf("a send posted with no when: %d", p.code)
	}
	review := b.post(path+"/send/review", url.Values{"when": {"now"}, "version": {"1"}})
	mustContain(t, "the review", review, "Send “Frost”?", "It goes to 1 reader now.", `action="`+path+`/send"`,
		`name="when" value="now"`, `name="audience" value="1"`, `name="version" value="1"`, ">Send to 1 readers<")
	if got, _ := e.st.Issue(ctx, is.ID); got.Status != store.IssueDraft {
		t.Fatalf("the review changed the issue: %+v", got)
	}
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "version": {"1"}, "audience": {"1"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=sending") {
		t.Fatalf("send: %d %s", p.code, p.body)
	}
}

// TestConsoleIssueSearch: the list's search box finds issues by words of
// their subject or body; a query over the bound says so and lists
// nothing found.
func TestConsoleIssueSearch(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	for _, c := range []store.IssueContent{{Subject: "Moss and lichen", Body: "Green", Topics: []string{"digest"}},
		{Subject: "Ferns", Body: "Also green, and moss", Topics: []string{"digest"}}, {Subject: "Stones", Body: "Grey", Topics: []string{"digest"}}} {
		if _, err := e.st.CreateIssue(t.Context(), c, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := b.get("/admin/issues?q=MOSS")
	mustContain(t, "a search", p, `role="search"`, `name="q" type="search" value="MOSS"`, "Moss and lichen", "Ferns")
	if strings.Contains(p.body, "Stones") {
		t.Fatal("the search lists an issue without the word")
	}
	mustContain(t, "no match", b.get("/admin/issues?q=granite"), "No issue has those words")
	mustContain(t, "a query too long", b.get("/admin/issues?q="+strings.Repeat("x", 201)), "at most 200 bytes")
}
