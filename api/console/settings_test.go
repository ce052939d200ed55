package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/audit"
)

// TestSettingsPage: admins only; the form shows the environment's
// settings first; a refused value is a 400 with the reason and what was
// typed, nothing saved; a save is audited and in effect at once; a save
// from a page opened before another save is a 409.
func TestSettingsPage(t *testing.T) {
	e := newEnv(t)
	if p := e.signedIn(t, editorToken).get("/admin/settings"); p.code != http.StatusForbidden {
		t.Fatalf("an editor: %d", p.code)
	}
	b := e.signedIn(t, adminToken)
	p := b.get("/admin/settings")
	if p.code != http.StatusOK || !strings.Contains(p.body, `value="News &lt;news@example.com&gt;"`) || !strings.Contains(p.body, `name="version" value="0"`) {
		t.Fatalf("the form: %d %s", p.code, p.body)
	}
	good := url.Values{"version": {"0"}, "name": {"Café Weekly"}, "from": {"Café Weekly <weekly@example.com>"},
		"postal_address": {"1 Bean Street"}, "accent": {"#aa3300"}, "logo_url": {"https://example.com/logo.png"}}
	bad := url.Values{}
	for k, v := range good {
		bad[k] = v
	}
	bad.Set("from", "Café Weekly <weekly@elsewhere.org>")
	if p := b.post("/admin/settings", bad); p.code != http.StatusBadRequest || !strings.Contains(p.body, "NEWSLETTER_DKIM_DOMAIN") ||
		!strings.Contains(p.body, "weekly@elsewhere.org") {
		t.Fatalf("a From outside the DKIM domain: %d %s", p.code, p.body)
	}
	if v, err := e.st.SettingsVersion(context.Background()); err != nil || v != 0 {
		t.Fatalf("a refused save wrote version %d %v", v, err)
	}
	if p := b.post("/admin/settings", good); p.code != http.StatusSeeOther || p.location != "/admin/settings?done=saved" {
		t.Fatalf("save: %d %s", p.code, p.body)
	}
	if got := e.settings.Current(context.Background()); got.Name != "Café Weekly" || got.Version != 1 {
		t.Fatalf("in effect: %+v", got)
	}
	if list := e.audit.entries(); len(list) == 0 || list[0].Action != audit.SettingsChanged || list[0].Actor != "alice" ||
		!strings.Contains(list[0].Detail, "postal_address") {
		t.Fatalf("audit: %+v", list)
	}
	// The same page posted again: opened at version 0, now 1.
	good.Set("name", "Late edit")
	if p := b.post("/admin/settings", good); p.code != http.StatusConflict || !strings.Contains(p.body, "Late edit") {
		t.Fatalf("stale save: %d %s", p.code, p.body)
	}
	if got, _ := e.st.Settings(context.Background()); got.Name != "Café Weekly" {
		t.Fatalf("a stale save changed the name: %+v", got)
	}
}
