package console_test

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestSettingsTeamListAndConfirmedPage: the settings page saves the
// confirmed page's words and link and the team's test list (normalised);
// a bad address or URL is a 400 naming the field, nothing saved; the
// issue page then offers the list as boxes, and a test send to a box
// ticked and an address typed goes, one off every list is refused.
func TestSettingsTeamListAndConfirmedPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.signedIn(t, adminToken)
	good := url.Values{"version": {"0"}, "name": {"Café Weekly"}, "from": {"Café Weekly <weekly@example.com>"},
		"confirmed_heading": {"You're in"}, "confirmed_text": {"See you Friday."}, "confirmed_url": {"https://example.com/start"},
		"test_recipients": {"Team@Example.com,\r\nlead@example.com team@example.com"}}
	for field, v := range map[string]string{"test_recipients": "team@example.com, not-an-address", "confirmed_url": "ftp://example.com/x"} {
		bad := url.Values{}
		for k, vs := range good {
			bad[k] = vs
		}
		bad.Set(field, v)
		if p := admin.post("/admin/settings", bad); p.code != http.StatusBadRequest || !strings.Contains(p.body, field) {
			t.Fatalf("%s %q: %d, want 400 naming it:\n%s", field, v, p.code, p.body)
		}
	}
	if v, err := e.st.SettingsVersion(ctx); err != nil || v != 0 {
		t.Fatalf("a refused save wrote version %d %v", v, err)
	}
	if p := admin.post("/admin/settings", good); p.code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", p.code, p.body)
	}
	got, err := e.st.Settings(ctx)
	if err != nil || got.ConfirmedHeading != "You're in" || got.ConfirmedURL != "https://example.com/start" ||
		!reflect.DeepEqual(got.TestRecipients, []string{"team@example.com", "lead@example.com"}) {
		t.Fatalf("saved %+v %v", got, err)
	}
	mustContain(t, "the settings page", admin.get("/admin/settings"), "team@example.com, lead@example.com", `value="https://example.com/start"`)

	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "Team test", Body: "Hello", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ed := e.signedIn(t, editorToken)
	path := "/admin/issues/" + itoa(is.ID)
	mustContain(t, "the test-send form", ed.get(path), `id="test-offer"`, `value="team@example.com"`, `value="lead@example.com"`, `value="me@example.com"`)
	if p := ed.post(path+"/test", url.Values{"emails": {"lead@example.com", "you@example.com"}}); p.code != http.StatusSeeOther {
		t.Fatalf("test to the team: %d %s", p.code, p.body)
	}
	if p := ed.post(path+"/test", url.Values{"emails": {"lead@example.com", "stranger@example.net"}}); p.code != http.StatusForbidden || !strings.Contains(p.body, "stranger@example.net") {
		t.Fatalf("test to a stranger: %d %s", p.code, p.body)
	}
	if len(e.mail.tests) != 1 || !reflect.DeepEqual(e.mail.tests[0], []string{"lead@example.com", "you@example.com"}) {
		t.Fatalf("test sends %v, want the one to lead and you", e.mail.tests)
	}
}
