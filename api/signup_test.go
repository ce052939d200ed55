package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// sentConfirmation tells whether a confirmation for email was queued, and
// takes it out of the queue as the worker does when it has sent it (its
// TaskID is free again).
func (e *env) sentConfirmation(t *testing.T, email string) bool {
	t.Helper()
	err := e.insp.DeleteTask(tasks.QueueTransactional, tasks.ConfirmTaskID(email))
	if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// suppressedOnList tells whether GET /api/suppressions lists email.
func (e *env) suppressedOnList(t *testing.T, email string) bool {
	t.Helper()
	code, body := e.adminRaw(t, "GET", "/api/suppressions", "")
	if code != http.StatusOK {
		t.Fatalf("suppressions: %d %s", code, body)
	}
	return strings.Contains(body, `"email":"`+email+`"`)
}

// TestSignupDoesNotLiftASuppression: a signup for a complained or bounced
// address, double opt-in or not, is answered exactly as a stranger's, but
// the address stays suppressed (status and list) and gets one
// confirmation, not another within 30 days; the person's own confirmation
// lifts the suppression.
func TestSignupDoesNotLiftASuppression(t *testing.T) {
	for _, doubleOptIn := range []bool{true, false} {
		t.Run(fmt.Sprint("double opt-in ", doubleOptIn), func(t *testing.T) {
			e := newEnv(t, Config{DoubleOptIn: doubleOptIn, AdminToken: feedbackAdmin, WelcomeDelay: time.Hour,
				ConfirmHold: store.ConfirmHold{Every: time.Hour, PerDay: ConfirmationsPerDay}})
			ctx := context.Background()
			suppressed := map[string]store.Status{"spam@example.com": store.Complained, "gone@example.com": store.Bounced}
			for email, status := range suppressed {
				if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true}); err != nil {
					t.Fatal(err)
				}
				how := map[store.Status]store.FeedbackType{store.Complained: store.Complaint, store.Bounced: store.HardBounce}[status]
				if _, err := e.store.RecordFeedback(ctx, store.Feedback{Email: email, Type: how}, store.FeedbackPolicy{}); err != nil {
					t.Fatal(err)
				}
			}
			// What anyone gets, for a JSON client and for the form.
			_, wantJSON := e.post(t, "/subscribe", jsonCT, `{"email":"fresh@example.com","name":"Stranger"}`)
			_, wantForm := e.post(t, "/subscribe", formCT, "email=fresh2%40example.com&name=Stranger")
			for email, status := range suppressed {
				for round := 1; round <= 2; round++ {
					resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`","name":"Stranger"}`)
					if resp.StatusCode != http.StatusAccepted || strings.ReplaceAll(body, email, "fresh@example.com") != wantJSON {
						t.Fatalf("%s round %d: %d %s, want what anyone gets: %s", email, round, resp.StatusCode, body, wantJSON)
					}
					resp, body = e.post(t, "/subscribe", formCT, "email="+url.QueryEscape(email))
					if resp.StatusCode != http.StatusAccepted || strings.ReplaceAll(body, email, "fresh2@example.com") != wantForm {
						t.Fatalf("%s round %d, the form: %d, not the page anyone gets", email, round, resp.StatusCode)
					}
					if got := e.status(t, email); got != status || !e.suppressedOnList(t, email) {
						t.Fatalf("%s round %d: status %s, listed %v: a stranger's signup lifted the suppression", email, round, got, e.suppressedOnList(t, email))
					}
					if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID(email)); !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
						t.Fatalf("%s: a welcome was queued for a suppressed address: %v", email, err)
					}
					// One confirmation in the first round; the second
					// round, its confirmation sent, gets none for a month.
					if sent := e.sentConfirmation(t, email); sent != (round == 1) {
						t.Fatalf("%s round %d: confirmation queued %v", email, round, sent)
					}
				}
			}
			// The person opens the link and confirms: the suppression is
			// lifted, the welcome follows.
			tok := e.sign(t, token.Confirm, "spam@example.com")
			if resp, body := e.post(t, "/confirm", formCT, "token="+url.QueryEscape(tok)); resp.StatusCode != http.StatusOK {
				t.Fatalf("confirm: %d %s", resp.StatusCode, body)
			}
			if e.status(t, "spam@example.com") != store.Active || e.suppressedOnList(t, "spam@example.com") {
				t.Fatal("the person's own confirmation did not lift the suppression")
			}
			if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("spam@example.com")); err != nil {
				t.Fatalf("no welcome after confirming: %v", err)
			}
			sub, _ := e.store.Get(ctx, "spam@example.com")
			if sub.Name != "Stranger" {
				t.Fatalf("the name of the signup that asked for the confirmation: %q", sub.Name)
			}
		})
	}
}

// TestNamesRefuseControlAndFormatCharacters: a name with a control or
// format character, a line or paragraph separator, is a 400 from the form
// and from JSON, at signup and in the preference centre, and nothing is
// stored or queued.
func TestNamesRefuseControlAndFormatCharacters(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: true, Origin: origin})
	bad := []string{"Ann\x00", "Ann\x07", "moc.evil\u202e", "A\u200bnn", "Ann\ufeff", "Ann\u2028Bee", "Ann\u2029Bee", "A\u0085nn", "Ann\tBee"}
	for _, name := range bad {
		body, err := json.Marshal(map[string]string{"email": "named@example.com", "name": name})
		if err != nil {
			t.Fatal(err)
		}
		if resp, b := e.post(t, "/subscribe", jsonCT, string(body)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("JSON name %q: %d %s", name, resp.StatusCode, b)
		}
		form := url.Values{"email": {"named@example.com"}, "name": {name}}.Encode()
		if resp, _ := e.post(t, "/subscribe", formCT, form); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("form name %q: %d", name, resp.StatusCode)
		}
	}
	if e.status(t, "named@example.com") != "" || e.taskCount(t, tasks.QueueTransactional) != 0 {
		t.Fatal("a refused name was stored or mailed")
	}
	// Names people have still pass.
	if resp, b := e.post(t, "/subscribe", jsonCT, `{"email":"zoe@example.com","name":"Zoë O'Brien-李"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("an ordinary name: %d %s", resp.StatusCode, b)
	}
	// The preference centre.
	ctx := context.Background()
	if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "p@example.com", Name: "Pat", Activate: true}); err != nil {
		t.Fatal(err)
	}
	tok := e.sign(t, token.Preferences, "p@example.com")
	for _, name := range bad {
		resp, _ := e.prefsPost(t, "/preferences", origin, url.Values{"token": {tok}, "name": {name}, "topics": {"digest"}})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("preferences name %q: %d", name, resp.StatusCode)
		}
	}
	if sub, _ := e.store.Get(ctx, "p@example.com"); sub.Name != "Pat" {
		t.Fatalf("a refused name was saved: %q", sub.Name)
	}
}

// TestPlusTagsShareTheCooldown: victim+1@… to victim+10@… (and Gmail's
// dotted and googlemail spellings) from one client are one mailbox: one
// confirmation, every answer the same, the held spellings not stored; the
// one that went out keeps its address as typed.
func TestPlusTagsShareTheCooldown(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, ConfirmHold: store.ConfirmHold{Every: 10 * time.Minute, PerDay: ConfirmationsPerDay}})
	var spellings []string
	for i := 1; i <= 10; i++ {
		spellings = append(spellings, fmt.Sprintf("victim+%d@gmail.com", i))
	}
	spellings = append(spellings, "v.i.c.t.i.m@gmail.com", "Victim+x@googlemail.com")
	_, want := e.post(t, "/subscribe", jsonCT, `{"email":"someone@example.com"}`)
	sent := 0
	for _, email := range spellings {
		resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`)
		typed := strings.ToLower(email)
		if resp.StatusCode != http.StatusAccepted || strings.ReplaceAll(body, typed, "someone@example.com") != want {
			t.Fatalf("%s: %d %s, want what anyone gets", email, resp.StatusCode, body)
		}
		if e.sentConfirmation(t, typed) {
			sent++
		}
	}
	if sent != 1 {
		t.Fatalf("%d confirmations into one mailbox, want 1", sent)
	}
	if sub, err := e.store.Get(context.Background(), "victim+1@gmail.com"); err != nil || sub.Email != "victim+1@gmail.com" {
		t.Fatalf("the first spelling, as typed: %+v %v", sub, err)
	}
	if s := e.status(t, "victim+2@gmail.com"); s != "" {
		t.Fatalf("a held spelling was stored as %s", s)
	}
}

// TestUnsubscribeLinkOnePerMailbox: in confirm mode, five POST /unsubscribe
// for one address (some with a +tag) send one mail, each answered the same.
func TestUnsubscribeLinkOnePerMailbox(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, UnsubscribeByEmail: UnsubscribeConfirm,
		ConfirmHold: store.ConfirmHold{Every: 10 * time.Minute, PerDay: ConfirmationsPerDay}})
	e.post(t, "/subscribe", jsonCT, `{"email":"keep@example.com"}`)
	links := 0
	var first string
	for i, email := range []string{"keep@example.com", "keep@example.com", "keep+1@example.com", "KEEP@example.com", "keep+2@example.com"} {
		resp, body := e.post(t, "/unsubscribe", jsonCT, `{"email":"`+email+`"}`)
		body = strings.ReplaceAll(body, strings.ToLower(email), "keep@example.com")
		if i == 0 {
			first = body
		}
		if resp.StatusCode != http.StatusAccepted || body != first {
			t.Fatalf("request %d: %d %s, want %s", i+1, resp.StatusCode, body, first)
		}
		// The worker sends it: the task leaves the queue.
		err := e.insp.DeleteTask(tasks.QueueTransactional, tasks.UnsubscribeLinkTaskID(strings.ToLower(email)))
		if err == nil {
			links++
		}
	}
	if links != 1 {
		t.Fatalf("%d unsubscribe links mailed to one mailbox, want 1", links)
	}
	if e.status(t, "keep@example.com") != store.Active {
		t.Fatal("an address alone unsubscribed in confirm mode")
	}
}

// queued counts the tasks in every queue, in any state (events waiting
// for their group included).
func (e *env) queued(t *testing.T) int {
	t.Helper()
	n := 0
	for _, q := range tasks.Queues {
		info, err := e.insp.GetQueueInfo(q)
		if err != nil {
			continue // no task was ever queued there
		}
		n += info.Size + info.Aggregating
	}
	return n
}

// TestJSONFieldsHaveTheirTypes: every JSON body the API reads holds its
// documented fields with their types; a list for a string, a number, null,
// an object, a field twice, an unknown field, something after the object
// or no object at all is a 400 that changes nothing. The right body is
// accepted (so the 400s are the types').
func TestJSONFieldsHaveTheirTypes(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, AdminToken: feedbackAdmin, Origin: "https://news.example.com"})
	ctx := context.Background()
	if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "stay@example.com", Activate: true}); err != nil {
		t.Fatal(err)
	}
	prefs := e.sign(t, token.Preferences, "stay@example.com")
	for _, c := range []struct {
		path, good string
		bad        []string
	}{
		{"/subscribe", `{"email":"new@example.com","name":"N","timezone":"Europe/Berlin","topics":["digest"]}`, []string{
			`{"email":["a@example.com"]}`, `{"email":42}`, `{"email":null}`, `{"email":{"a":"b"}}`, `{"email":true}`,
			`{"email":"a@example.com","email":"b@example.com"}`, `{"email":"a@example.com","emial":"x"}`,
			`{"email":"a@example.com"} {"email":"b@example.com"}`, `{"email":"a@example.com"}x`, `["a@example.com"]`, `"a@example.com"`,
			`{"email":"a@example.com","name":["N"]}`, `{"email":"a@example.com","topics":"digest"}`, `{"email":"a@example.com","topics":[null]}`,
			`{"email":"a@example.com","topics":[["digest"]]}`,
		}},
		{"/unsubscribe", "", []string{`{"email":["stay@example.com"]}`, `{"email":null}`, `{"token":["x"]}`, `{"email":"stay@example.com","why":"x"}`}},
		{"/confirm", "", []string{`{"token":["x"]}`, `{"token":1}`}},
		{"/preferences", "", []string{`{"token":"` + prefs + `","leave":["all"]}`, `{"token":"` + prefs + `","topics":"digest"}`}},
		{"/api/items", `{"title":"T","url":"https://example.com/a","summary":"S"}`, []string{
			`{"title":["T"],"url":"https://example.com/a"}`, `{"title":"T","url":"https://example.com/a","summary":7}`, `{"title":"T","url":"https://example.com/a","extra":"x"}`}},
		{"/api/events", `{"email":"stay@example.com","title":"T","url":"https://example.com/e"}`, []string{
			`{"email":["stay@example.com"],"title":"T","url":"https://example.com/e"}`, `{"email":"stay@example.com","title":"T","url":null}`}},
		{"/api/digest/run", `{"period":"2026-W10"}`, []string{`{"period":["2026-W10"]}`, `{"period":202610}`, `{"period":"2026-W10","force":"yes"}`}},
		{"/webhooks/bounce", `{"email":"stay@example.com","type":"soft","reason":"full","id":"r1"}`, []string{
			`{"email":["stay@example.com"],"type":"hard"}`, `{"email":"stay@example.com","type":["hard"]}`, `{"email":"stay@example.com","type":"hard","reason":{"x":1}}`,
			`{"email":"stay@example.com","type":"hard","Email":"other@example.com"}`}},
	} {
		admin := strings.HasPrefix(c.path, "/api/") || c.path == "/webhooks/bounce"
		post := func(body string) (int, string) {
			if admin {
				return e.adminRaw(t, "POST", c.path, body)
			}
			resp, b := e.post(t, c.path, jsonCT, body)
			return resp.StatusCode, b
		}
		queued := e.queued(t)
		for _, body := range c.bad {
			if code, b := post(body); code != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s, want 400", c.path, body, code, b)
			}
		}
		if e.status(t, "stay@example.com") != store.Active || e.status(t, "a@example.com") != "" {
			t.Fatalf("%s: a refused body changed the list", c.path)
		}
		if n := e.queued(t); n != queued {
			t.Fatalf("%s: refused bodies queued %d tasks", c.path, n-queued)
		}
		if c.good == "" {
			continue
		}
		if code, b := post(c.good); code/100 != 2 {
			t.Fatalf("%s %s: %d %s, want it accepted", c.path, c.good, code, b)
		}
		if n := e.queued(t); n == queued && c.path != "/api/items" {
			t.Fatalf("%s: the right body queued nothing", c.path)
		}
	}
}

// TestStrangerCannotRewritePendingChoices: a pending person's name, time
// zone and topics are theirs until they confirm. Someone who signs the
// same address up again (past any cooldown) with other choices only gets
// the confirmation sent again, and the person's first link confirms the
// person's own choices.
func TestStrangerCannotRewritePendingChoices(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, Topics: threeTopics(t)})
	own := url.Values{"email": {"mia@example.com"}, "name": {"Mia"}, "timezone": {"Europe/Paris"}, "topics": {"research"}}
	if resp, body := e.post(t, "/subscribe", formCT, own.Encode()); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the person's signup: %d %s", resp.StatusCode, body)
	}
	firstLink := e.sign(t, token.Confirm, "mia@example.com")
	stranger := url.Values{"email": {"mia@example.com"}, "name": {"Evil"}, "timezone": {"America/New_York"}, "topics": {"digest", "updates"}}
	if resp, body := e.post(t, "/subscribe", formCT, stranger.Encode()); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the stranger's signup: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.post(t, "/confirm", formCT, "token="+url.QueryEscape(firstLink)); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Subscription confirmed") {
		t.Fatalf("confirm with the first link: %d %s", resp.StatusCode, body)
	}
	sub, err := e.store.Get(context.Background(), "mia@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Status != store.Active || sub.Name != "Mia" || sub.Timezone != "Europe/Paris" || !slices.Equal(sub.Topics, []string{"research"}) {
		t.Fatalf("confirmed %+v, want Mia, Europe/Paris, [research]", sub)
	}
}
