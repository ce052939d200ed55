package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleWording: the publisher reads words, not names from the
// code (the bulk actions), the accent colour has a picker beside its
// checked field, a bad logo or colour says what to do and saves
// nothing, and a page the role may not open links to where an admin
// makes tokens and accounts.
func TestConsoleWording(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	list := b.get("/admin/subscribers")
	mustContain(t, "the bulk actions", list, `<option value="add_topic">Add to a topic</option>`, `<option value="erase">Erase for good</option>`)
	if strings.Contains(list.body, ">add_topic<") {
		t.Fatal("a bulk action is shown by its code name")
	}
	settings := b.get("/admin/settings")
	mustContain(t, "the settings", settings, `type="color"`, `data-pick-for="accent"`, `pattern="#[0-9a-fA-F]{6}"`)
	base := url.Values{"version": {"0"}, "name": {"Café Weekly"}, "from": {"News <news@example.com>"}, "postal_address": {"1 Bean Street"}}
	for field, c := range map[string]struct{ value, says string }{
		"logo_url": {"http://example.com/logo.png", "mail clients block images over plain http"},
		"accent":   {"blue", "#rrggbb"},
	} {
		in := url.Values{}
		for k, v := range base {
			in[k] = v
		}
		in.Set(field, c.value)
		if p := b.post("/admin/settings", in); p.code != http.StatusBadRequest || !strings.Contains(p.body, c.says) {
			t.Fatalf("%s %q: %d, want 400 saying %q", field, c.value, p.code, c.says)
		}
		if v, err := e.st.SettingsVersion(context.Background()); err != nil || v != 0 {
			t.Fatalf("a refused %s saved version %d %v", field, v, err)
		}
	}
	denied := e.signedIn(t, viewerToken).get("/admin/settings")
	mustContain(t, "a page the role may not open", denied, `<a href="/admin/tokens">tokens</a>`, `<a href="/admin/accounts">accounts</a>`)
	if strings.Contains(denied.body, "Ask an admin for a token") {
		t.Fatal("the old wording")
	}
}
