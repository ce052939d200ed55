package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// TestConfirmedPageIsThePublishers: the page after confirming shows the
// settings' heading and text (a blank line a paragraph) and leads to the
// settings' URL; without them, the built-in words and no link (no
// archive served here).
func TestConfirmedPageIsThePublishers(t *testing.T) {
	for _, c := range []struct {
		name string
		nl   store.Settings
		want []string
		not  []string
	}{
		{"the publisher's", store.Settings{Name: "Café Weekly", ConfirmedHeading: "You're in, welcome",
			ConfirmedText: "The next letter comes on Friday.\n\nMeanwhile,\nsay hello.", ConfirmedURL: "https://cafe.example.com/start"},
			[]string{"<h1>You&#39;re in, welcome</h1>", "<p>The next letter comes on Friday.</p>", "<p>Meanwhile, say hello.</p>",
				`<a href="https://cafe.example.com/start" class="button" data-next>Continue</a>`},
			[]string{"Subscription confirmed"}},
		{"the built-in", store.Settings{Name: "Café Weekly"},
			[]string{"<h1>Subscription confirmed</h1>", "will get our newsletter from now on"}, []string{"data-next"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvWith(t, Config{}, func(d *Deps) { d.Settings = settings.Fixed(c.nl) })
			if _, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: "ann@example.com", Topics: []string{"digest"}}); err != nil {
				t.Fatal(err)
			}
			tok := e.sign(t, token.Confirm, "ann@example.com")
			resp, body := e.post(t, "/confirm", "application/x-www-form-urlencoded", "token="+url.QueryEscape(tok))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("confirm: %d %s", resp.StatusCode, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q:\n%s", w, body)
				}
			}
			for _, w := range c.not {
				if strings.Contains(body, w) {
					t.Errorf("the page has %q:\n%s", w, body)
				}
			}
		})
	}
}

// TestTeamTestRecipientsAddToTheEnvironments: a test send reaches the
// settings' test_recipients besides NEWSLETTER_TEST_RECIPIENTS; an
// address on neither is refused (403), nothing mailed.
func TestTeamTestRecipientsAddToTheEnvironments(t *testing.T) {
	ie := &issueEnv{mail: &fakeIssueMail{}}
	ie.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		ie.st = d.Store.(*store.Redis)
		*d = d.WithIssues(ie.st, ie.mail)
		d.TestGate = &issues.TestGate{Recipients: []string{"me@example.com"}}
		d.Settings = settings.Fixed(store.Settings{Name: "N", TestRecipients: []string{"team@example.com"}})
	})
	p := fmt.Sprintf("/api/issues/%d/test", ie.create(t, goodIssue))
	if code, out := ie.do(t, "POST", p, `{"emails":["me@example.com","Team@Example.com"]}`); code != 200 || !strings.Contains(out, `"sent":2`) {
		t.Fatalf("to the environment's and the team's: %d %s, want 200, two addresses", code, out)
	}
	if code, out := ie.do(t, "POST", p, `{"emails":["team@example.com","other@example.com"]}`); code != http.StatusForbidden || !strings.Contains(out, "test_recipients") {
		t.Fatalf("to one off both lists: %d %s, want 403 naming test_recipients", code, out)
	}
	if len(ie.mail.tests) != 1 {
		t.Fatalf("%d test sends mailed, want the one allowed", len(ie.mail.tests))
	}
}
