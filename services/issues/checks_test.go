package issues

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// checkMail previews a counted link that answers; its body links to a
// page that is gone.
type checkMail struct{ site string }

func (m checkMail) Preview(_ context.Context, is store.Issue, _, format string) (string, []byte, error) {
	if format == "text" {
		return "text/plain", []byte(is.Body), nil
	}
	return "text/html", []byte(`<a href="` + m.site + `/r/counted">x</a>`), nil
}
func (m checkMail) HTMLSize(context.Context, store.Issue) (int, error)    { return 100, nil }
func (m checkMail) SendTest(context.Context, store.Issue, []string) error { return nil }
func (m bodyMail) BodyHTML(context.Context, store.Issue) (string, error) {
	return `<a href="` + m.site + `/gone">x</a>`, nil
}

type bodyMail struct{ checkMail }

// TestCheckerAsksTheBodysLinks: a renderer that renders the body alone
// has the body's links asked (the one that is gone is an error), not the
// counted redirect of the preview; one that does not has the preview's.
func TestCheckerAsksTheBodysLinks(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(site.Close)
	checks := &presend.Checker{Links: presend.NewLinkChecker(netguard.Guard{AllowPrivate: true})}
	is := store.Issue{IssueContent: store.IssueContent{Subject: "Hi", Body: "text", Topics: []string{"digest"}}}

	rs, err := (&Checker{Renderer: bodyMail{checkMail{site.URL}}, Checks: checks}).Run(context.Background(), is)
	if err != nil {
		t.Fatal(err)
	}
	if errs := presend.Errors(rs); len(errs) != 1 || !strings.Contains(errs[0].Message, "/gone") {
		t.Fatalf("the body's links: %+v", rs)
	}
	rs, err = (&Checker{Renderer: checkMail{site.URL}, Checks: checks}).Run(context.Background(), is)
	if err != nil {
		t.Fatal(err)
	}
	if errs := presend.Errors(rs); len(errs) != 0 {
		t.Fatalf("the preview's links: %+v", rs)
	}
	for _, r := range rs {
		if r.Check == "postal_address" {
			t.Errorf("the postal address judged without settings: %+v", r)
		}
	}
}
