package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestFieldsScreenDeclaresFields: the Fields screen lists what GET
// /api/fields lists (the same store), an editor declares a field with
// its type and choices and changes a choice field's choices; a bad name,
// a choice field without choices and a change of type are refused with
// the store's reason, nothing changed; a viewer sees no form.
func TestFieldsScreenDeclaresFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ed := e.signedIn(t, editorToken)
	if p := ed.post("/admin/fields", url.Values{"name": {"plan"}, "type": {"choice"}, "choices": {"free\r\n\r\n pro \r\nteam"}}); p.code != http.StatusSeeOther {
		t.Fatalf("declare plan: %d %s", p.code, p.body)
	}
	if p := ed.post("/admin/fields", url.Values{"name": {"seats"}, "type": {"number"}}); p.code != http.StatusSeeOther {
		t.Fatalf("declare seats: %d %s", p.code, p.body)
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"name": {"Bad Name"}, "type": {"text"}}, "starting with a letter"},
		{url.Values{"name": {"size"}, "type": {"choice"}}, "1 to 100 choices"},
		{url.Values{"name": {"seats"}, "type": {"text"}}, "a field keeps its type"},
		{url.Values{"name": {"when"}, "type": {"time"}}, "one of text, number, date, choice"},
	} {
		p := ed.post("/admin/fields", c.form)
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, c.want) {
			t.Errorf("%v: %d, want 400 saying %q:\n%s", c.form, p.code, c.want, p.body)
		}
	}
	defs, err := e.st.FieldDefs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.FieldDef{{Name: "plan", Type: store.FieldChoice, Choices: []string{"free", "pro", "team"}}, {Name: "seats", Type: store.FieldNumber}}
	if fmt.Sprint(defs) != fmt.Sprint(want) {
		t.Fatalf("declared %v, want %v (a refused form changed nothing)", defs, want)
	}
	if p := ed.post("/admin/fields", url.Values{"name": {"plan"}, "type": {"choice"}, "choices": {"free\npro\nteam\nschool"}}); p.code != http.StatusSeeOther {
		t.Fatalf("change the choices: %d %s", p.code, p.body)
	}
	p := e.signedIn(t, viewerToken).get("/admin/fields")
	mustContain(t, "the viewer's Fields screen", p, `data-field-name="plan"`, "free, pro, team, school", `data-field-name="seats"`, "number")
	if strings.Contains(p.body, `id="field-declare"`) {
		t.Fatal("a viewer is offered the form that declares a field")
	}
	if p := e.signedIn(t, viewerToken).post("/admin/fields", url.Values{"name": {"x"}, "type": {"text"}}); p.code != http.StatusForbidden {
		t.Fatalf("a viewer's declaration: %d, want 403", p.code)
	}
	if !slices.Contains(e.audit.actions(), "ed field.declared") {
		t.Fatalf("no field.declared in the audit log: %v", e.audit.actions())
	}
}

// TestPersonPageEditsTagsAndFields: a person's page shows their tags and
// every declared field's value, and its edit form sets them (tags
// replaced, fields merged, "" clears); a bad value is a 400 naming the
// field, and nothing changes.
func TestPersonPageEditsTagsAndFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, d := range []store.FieldDef{{Name: "plan", Type: store.FieldChoice, Choices: []string{"free", "pro"}}, {Name: "seats", Type: store.FieldNumber}, {Name: "company", Type: store.FieldText}} {
		if _, err := e.st.DefineField(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	sub := e.subscribe(t, "ada@example.com", "digest")
	if _, err := e.st.AddTags(ctx, sub.ID, []string{"old"}); err != nil {
		t.Fatal(err)
	}
	admin := e.signedIn(t, adminToken)
	path := "/admin/subscribers/" + itoa(sub.ID)
	mustContain(t, "the person's page", admin.get(path), `data-field="tags">old<`, `name="field.plan"`, `name="field.seats"`, `name="field.company"`, `value="old"`)
	edit := url.Values{"name": {""}, "timezone": {""}, "tags_shown": {"1"}, "tags": {"vip, beta ,, "}, "fields_shown": {"1"},
		"field.plan": {"pro"}, "field.seats": {"12.0"}, "field.company": {"Acme"}}
	if p := admin.post(path+"/edit", edit); p.code != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.code, p.body)
	}
	got, err := e.st.Get(ctx, "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Tags) != "[beta vip]" || got.Fields["plan"] != "pro" || got.Fields["seats"] != "12" || got.Fields["company"] != "Acme" {
		t.Fatalf("after the edit: tags %v, fields %v", got.Tags, got.Fields)
	}
	mustContain(t, "the page after the edit", admin.get(path), `data-field="tags">beta, vip<`, `data-field="field-plan">pro<`, `data-field="field-seats">12<`)
	for _, bad := range []struct{ key, value, want string }{
		{"field.seats", "many", "not a number"},
		{"field.plan", "gold", "not one of"},
		{"field.nope", "x", "nope"},
		{"tags", "a b", "tags"},
	} {
		f := url.Values{}
		for k, v := range edit {
			f[k] = v
		}
		f.Set(bad.key, bad.value)
		f.Set("field.company", "Changed")
		p := admin.post(path+"/edit", f)
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, bad.want) {
			t.Errorf("%s=%q: %d, want 400 saying %q:\n%s", bad.key, bad.value, p.code, bad.want, p.body)
		}
	}
	if after, _ := e.st.Get(ctx, "ada@example.com"); fmt.Sprint(after.Tags) != "[beta vip]" || after.Fields["company"] != "Acme" {
		t.Fatalf("a refused edit changed the person: tags %v, fields %v", after.Tags, after.Fields)
	}
	clear := url.Values{"name": {""}, "timezone": {""}, "fields_shown": {"1"}, "field.company": {""}}
	if p := admin.post(path+"/edit", clear); p.code != http.StatusSeeOther {
		t.Fatalf("clear: %d %s", p.code, p.body)
	}
	if after, _ := e.st.Get(ctx, "ada@example.com"); after.Fields["company"] != "" || after.Fields["plan"] != "pro" || fmt.Sprint(after.Tags) != "[beta vip]" {
		t.Fatalf("clearing company: tags %v, fields %v (the rest must stay)", after.Tags, after.Fields)
	}
}

var segmentPersonRe = regexp.MustCompile(`<tr data-person="(\d+)"><td><a href="/admin/subscribers/(\d+)">`)

// TestSegmentPageListsItsPeople: a segment's page lists its active
// people, 50 at a time with a link to each, and a cursor to the next
// page; together the pages are exactly the segment's people.
func TestSegmentPageListsItsPeople(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 63 {
		sub := e.subscribe(t, fmt.Sprintf("p%02d@example.com", i), "digest")
		if i%3 == 2 {
			continue // untagged: not in the segment
		}
		if _, err := e.st.AddTags(ctx, sub.ID, []string{"vip"}); err != nil {
			t.Fatal(err)
		}
		want[itoa(sub.ID)] = true
	}
	seg, err := e.st.CreateSegment(ctx, "VIPs", "tag:vip")
	if err != nil {
		t.Fatal(err)
	}
	v := e.signedIn(t, viewerToken)
	path := "/admin/segments/" + itoa(seg.ID)
	seen := map[string]bool{}
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 42 people make")
		}
		p := v.get(path)
		if p.code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, p.code, p.body)
		}
		rows := segmentPersonRe.FindAllStringSubmatch(p.body, -1)
		if len(rows) > 50 {
			t.Fatalf("%s lists %d people, at most 50", path, len(rows))
		}
		for _, m := range rows {
			if !want[m[1]] || seen[m[1]] || m[1] != m[2] {
				t.Fatalf("%s lists person %s (in the segment: %v, seen before: %v)", path, m[1], want[m[1]], seen[m[1]])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := regexp.MustCompile(`href="(/admin/segments/\d+\?after=\d+)" rel="next"`).FindStringSubmatch(p.body); m != nil {
			path = m[1]
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("the pages listed %d people, the segment has %d", len(seen), len(want))
	}
}
