package console_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestSearchByDomain: "example.org" or "@example.org", which no address
// or name begins with, lists everyone at that domain (and nobody at
// another, nor at a domain that merely ends the same); a query that is
// no domain is the prefix search alone, and nothing changes.
func TestSearchByDomain(t *testing.T) {
	e := newEnv(t)
	at := []string{"ann@example.org", "bob@example.org", "cy@example.org"}
	for _, a := range at {
		e.subscribe(t, a, "digest")
	}
	e.subscribe(t, "dee@example.com", "digest")
	e.subscribe(t, "eve@notexample.org", "digest")
	b := e.signedIn(t, viewerToken)
	for _, q := range []string{"example.org", "@example.org", " @Example.ORG "} {
		p := b.get("/admin/subscribers?q=" + url.QueryEscape(q))
		mustContain(t, "a search for "+q, p, `data-domain="example.org"`)
		for _, a := range at {
			mustContain(t, "a search for "+q, p, a)
		}
		if strings.Contains(p.body, "dee@example.com") || strings.Contains(p.body, "eve@notexample.org") {
			t.Fatalf("a search for %q lists someone at another domain", q)
		}
	}
	// A prefix that finds people stays a prefix search.
	if p := b.get("/admin/subscribers?q=ann"); !strings.Contains(p.body, "ann@example.org") || strings.Contains(p.body, "data-domain") {
		t.Fatalf("a prefix search: %d", p.code)
	}
	// No domain (a space, a character no domain has): no domain search.
	if p := b.get("/admin/subscribers?q=" + url.QueryEscape("exa mple.org")); strings.Contains(p.body, "data-domain") || strings.Contains(p.body, "ann@example.org") {
		t.Fatal("a query that is no domain was searched as one")
	}
	for q, want := range map[string]bool{"example.org": true, "@example.org": true, "@localhost": true, "localhost": false, "a b.org": false, "x@example.org": false, "": false, "@": false} {
		if _, ok := store.SearchDomainOf(q); ok != want {
			t.Errorf("SearchDomainOf(%q): %v, want %v", q, ok, want)
		}
	}
}
