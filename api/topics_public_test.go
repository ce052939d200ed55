package api

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
)

// assignedTopics are threeTopics with "insiders", a default topic the
// product assigns (public: false).
func assignedTopics(t *testing.T) *topics.Set {
	t.Helper()
	set, err := topics.Parse([]byte(`topics:
- {id: digest, name: Weekly digest, default: true}
- {id: updates, name: Product updates, default: true}
- {id: insiders, name: Insiders, default: true, public: false}
`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestNonPublicTopicIsNotOnTheSignup: a topic with public: false is not
// on the public form and not among a signup's defaults; a crafted POST
// /subscribe naming it (form or JSON) is a 400 saying so, nothing
// stored. The admin API gives it; GET /api/topics shows "public"; the
// preference centre shows it to someone who has it, and refuses it to
// someone who does not.
func TestNonPublicTopicIsNotOnTheSignup(t *testing.T) {
	const origin = "https://news.example.com"
	e := newHooksEnv(t, Config{DoubleOptIn: false, Topics: assignedTopics(t), Origin: origin})
	if _, page := e.get(t, "/"); strings.Contains(page, "insiders") || !strings.Contains(page, `value="updates" checked`) {
		t.Fatalf("the form offers the non-public topic:\n%s", page)
	}
	for ct, body := range map[string]string{
		formCT: "email=crafted%40x.io&topics_shown=1&topics=digest&topics=insiders",
		jsonCT: `{"email":"crafted@x.io","topics":["insiders"]}`,
	} {
		resp, answer := e.post(t, "/subscribe", ct, body)
		if resp.StatusCode != 400 || !strings.Contains(answer, "not open to signup") {
			t.Fatalf("%s: %d %s", ct, resp.StatusCode, answer)
		}
		if strings.Contains(answer, `value="insiders"`) {
			t.Fatalf("the form shown again offers the non-public topic:\n%s", answer)
		}
	}
	if e.status(t, "crafted@x.io") != "" {
		t.Fatal("a refused signup stored the address")
	}
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"plain@x.io"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	if sub, _ := e.store.Get(context.Background(), "plain@x.io"); !slices.Equal(sub.Topics, []string{"digest", "updates"}) {
		t.Fatalf("a signup's defaults: %v, want the public ones", sub.Topics)
	}

	if code, body := e.hookAdmin(t, "POST", "/api/subscribers", `{"email":"member@x.io","topics":["digest","insiders"],"reason":"a customer"}`); code != 201 {
		t.Fatalf("the admin API gives a non-public topic: %d %s", code, body)
	}
	// The topics API's JSON (GET and PUT /api/topics, `newsletter topics
	// show`): "public", absent meaning true.
	js := catalog.TopicsToJSON(assignedTopics(t))
	b, _ := json.Marshal(js)
	if !strings.Contains(string(b), `"id":"insiders","name":"Insiders","description":"","default":true,"archive":true,"public":false`) ||
		!strings.Contains(string(b), `"id":"digest","name":"Weekly digest","description":"","default":true,"archive":true,"public":true`) {
		t.Fatalf("the topics' JSON: %s", b)
	}
	if !catalog.TopicFromJSON(js[2]).Assigned || catalog.TopicFromJSON(catalog.TopicJSON{ID: "x", Name: "X"}).Assigned {
		t.Fatal("TopicFromJSON reads public wrong (absent is true)")
	}

	_, page := e.get(t, "/preferences?token="+url.QueryEscape(e.sign(t, token.Preferences, "member@x.io")))
	if !strings.Contains(page, `value="insiders" checked`) {
		t.Fatalf("a member does not see the topic they have:\n%s", page)
	}
	tok := e.sign(t, token.Preferences, "plain@x.io")
	if _, page := e.get(t, "/preferences?token="+url.QueryEscape(tok)); strings.Contains(page, "insiders") {
		t.Fatalf("the preference centre offers the non-public topic:\n%s", page)
	}
	resp, body := e.prefsPost(t, "/preferences", origin, url.Values{"token": {tok}, "topics": {"digest", "insiders"}})
	if resp.StatusCode != 400 || !strings.Contains(body, "not open to signup") {
		t.Fatalf("a crafted preferences post: %d %s", resp.StatusCode, body)
	}
	if sub, _ := e.store.Get(context.Background(), "plain@x.io"); slices.Contains(sub.Topics, "insiders") {
		t.Fatalf("a refused post gave the topic: %v", sub.Topics)
	}
}
