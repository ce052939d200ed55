package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// The subscribers screen owns the list: search by the beginning of a
// name with the total and pages both ways, add by hand (the reason kept),
// edit, a bulk action on the ticked people, an erasure asked twice, and
// the export's progress page then its download.
func TestConsoleOwnsTheList(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("mara%d@example.com", i), Name: "Mara Quill", Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.signedIn(t, adminToken)

	p := b.get("/admin/subscribers?q=quill&limit=2")
	if p.code != 200 || !strings.Contains(p.body, "5 matches") || !strings.Contains(p.body, `rel="next"`) || strings.Contains(p.body, `rel="prev"`) {
		t.Fatalf("search: %d\n%s", p.code, p.body)
	}
	next := between(p.body, `<a href="`, `" rel="next"`)
	p2 := b.get(strings.ReplaceAll(next, "&amp;", "&"))
	if !strings.Contains(p2.body, `rel="prev"`) {
		t.Fatalf("page 2 has no way back:\n%s", p2.body)
	}

	// Add by hand without double opt-in: the reason is required, then kept.
	p = b.post("/admin/subscribers", url.Values{"email": {"hand@example.com"}, "name": {`Ann "Hand"`}, "topics": {"updates"}})
	if p.code != 400 || !strings.Contains(p.body, "reason: required") {
		t.Fatalf("add without a reason: %d\n%s", p.code, p.body)
	}
	p = b.post("/admin/subscribers", url.Values{"email": {"hand@example.com"}, "name": {`Ann "Hand"`}, "topics": {"updates"}, "reason": {"met at the fair"}})
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.location, "/admin/subscribers/") {
		t.Fatalf("add: %d %s\n%s", p.code, p.location, p.body)
	}
	p = b.get(p.location)
	if !strings.Contains(p.body, "met at the fair") || !strings.Contains(p.body, "added by hand") {
		t.Fatalf("the person's page shows no consent reason:\n%s", p.body)
	}
	sub, _ := e.st.Get(ctx, "hand@example.com")

	// Edit.
	p = b.post("/admin/subscribers/"+itoa(sub.ID)+"/edit", url.Values{"name": {"Ann Hand-Smith"}, "timezone": {"Europe/Paris"}, "topics_shown": {"1"}, "topics": {"digest", "updates"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", p.code, p.body)
	}
	got, _ := e.st.Get(ctx, "hand@example.com")
	if got.Name != "Ann Hand-Smith" || got.Timezone != "Europe/Paris" || !slices.Equal(got.Topics, []string{"digest", "updates"}) {
		t.Fatalf("edited: %+v", got)
	}
	if p = b.post("/admin/subscribers/"+itoa(sub.ID)+"/edit", url.Values{"name": {"bad\x01name"}}); p.code != 400 {
		t.Fatalf("a control character in the name: %d", p.code)
	}

	// Bulk on the ticked people.
	p = b.post("/admin/subscribers/bulk", url.Values{"scope": {"picked"}, "email": {"mara0@example.com", "mara1@example.com"}, "action": {"unsubscribe"}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("bulk: %d\n%s", p.code, p.body)
	}
	if s, _ := e.st.Get(ctx, "mara1@example.com"); s.Status != store.Unsubscribed {
		t.Fatalf("mara1 is %s", s.Status)
	}
	// Erase the list's filter: asked again with the count, then a job.
	p = b.post("/admin/subscribers/bulk", url.Values{"scope": {"filter"}, "status": {"unsubscribed"}, "action": {"erase"}})
	if p.code != 200 || !strings.Contains(p.body, "Erase 2 people?") {
		t.Fatalf("erase asked once: %d\n%s", p.code, p.body)
	}
	p = b.post("/admin/subscribers/bulk", url.Values{"scope": {"filter"}, "status": {"unsubscribed"}, "action": {"erase"}, "confirm": {"2"}})
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.location, "/admin/jobs/") {
		t.Fatalf("erase confirmed: %d %s\n%s", p.code, p.location, p.body)
	}
	if err := e.listRunner.Run(ctx, strings.TrimPrefix(p.location, "/admin/jobs/")); err != nil {
		t.Fatal(err)
	}
	if p = b.get(p.location); !strings.Contains(p.body, "done") {
		t.Fatalf("bulk job page:\n%s", p.body)
	}
	if _, err := e.st.Get(ctx, "mara0@example.com"); err == nil {
		t.Fatal("mara0 not erased")
	}

	// Export: the progress page, then the download.
	p = b.post("/admin/exports", url.Values{"q": {"mara"}})
	if p.code != http.StatusSeeOther || !strings.HasPrefix(p.location, "/admin/jobs/") {
		t.Fatalf("export: %d\n%s", p.code, p.body)
	}
	id := strings.TrimPrefix(p.location, "/admin/jobs/")
	if p = b.get("/admin/jobs/" + id); !strings.Contains(p.body, "running") || strings.Contains(p.body, "Download") {
		t.Fatalf("export before it ran:\n%s", p.body)
	}
	if err := e.listRunner.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if p = b.get("/admin/jobs/" + id); !strings.Contains(p.body, "/admin/exports/"+id+"/download") {
		t.Fatalf("export done:\n%s", p.body)
	}
	p = b.get("/admin/exports/" + id + "/download")
	if p.code != 200 || !strings.HasPrefix(p.header.Get("Content-Type"), "text/csv") || strings.Count(p.body, "\n") != 4 || !strings.Contains(p.body, "mara4@example.com") {
		t.Fatalf("download: %d %v\n%s", p.code, p.header, p.body)
	}
	// A viewer sees the list but none of the owner's forms.
	v := e.signedIn(t, viewerToken)
	if p = v.get("/admin/subscribers"); strings.Contains(p.body, "Add a person") || strings.Contains(p.body, "Bulk action") {
		t.Fatal("a viewer is offered the admin's forms")
	}
	if p = v.post("/admin/exports", url.Values{}); p.code != http.StatusForbidden {
		t.Fatalf("a viewer's export: %d", p.code)
	}
}

func between(s, a, b string) string {
	i := strings.Index(s, a+"/admin/subscribers?")
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	j := strings.Index(s, b)
	if j < 0 {
		return ""
	}
	return s[:j]
}
