package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// catalogProcess is one API process over a shared store, with its own
// catalog in memory (as each role has).
type catalogProcess struct {
	srv  *httptest.Server
	live *catalog.Live
}

func newCatalogProcess(t *testing.T, st *store.Redis) catalogProcess {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, err := catalog.Open(context.Background(), st, catalog.Options{First: topics.Default(time.Minute), Check: catalogmail.Check, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.ImportFirst(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := api.New(api.Config{AdminToken: settingsAdmin, Origin: "https://news.example.com"},
		api.Deps{Store: st.WithTopics(live), Catalog: live, Templates: catalogmail.Builtins{}, Log: log,
			Audit: audit.NewTrail(st, logredact.New([]byte("catalog-secret")), log, nil), AuditLog: st})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return catalogProcess{srv: srv, live: live}
}

// TestTopicsAtRunTime: the first start imports the built-in topics; a
// topic added through the API is on the signup form of another process
// without a restart and can be subscribed to; bad input is a 400 that
// changes nothing; a save over a later version is a 409; every save is
// versioned, in the history and audited.
func TestTopicsAtRunTime(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	one, two := newCatalogProcess(t, st), newCatalogProcess(t, st)
	ctx := context.Background()

	code, body := sendJSON(t, "GET", one.srv.URL+"/api/topics", "")
	if code != http.StatusOK || !strings.Contains(body, `"version":1`) || !strings.Contains(body, `"id":"digest"`) || !strings.Contains(body, `"id":"updates"`) {
		t.Fatalf("first import: %d %s", code, body)
	}

	for name, in := range map[string]string{
		"id with capitals":      `{"id":"Launches","name":"Launches"}`,
		"id with an underscore": `{"id":"new_things","name":"New"}`,
		"no name":               `{"id":"launches"}`,
		"control character":     `{"id":"launches","name":"Laun\u0007ches"}`,
		"feed not http":         `{"id":"launches","name":"Launches","feeds":[{"url":"ftp://example.com/feed"}]}`,
		"feed mode unknown":     `{"id":"launches","name":"Launches","feeds":[{"url":"https://example.com/feed","mode":"all"}]}`,
		"unknown field":         `{"id":"launches","name":"Launches","colour":"red"}`,
		"existing id":           `{"id":"digest","name":"Again"}`,
	} {
		if code, body := sendJSON(t, "POST", one.srv.URL+"/api/topics", in); code != http.StatusBadRequest && code != http.StatusConflict {
			t.Errorf("%s: %d %s, want 400 or 409", name, code, body)
		}
	}
	if c, err := st.Catalog(ctx); err != nil || c.Version != 1 {
		t.Fatalf("refused changes moved the version to %d (%v)", c.Version, err)
	}

	code, body = sendJSON(t, "POST", one.srv.URL+"/api/topics", `{"id":"launches","name":"Product launches","description":"When we ship.","default":false,"archive":false,
		"feeds":[{"url":"https://example.com/releases.atom","mode":"each","max_per_day":2}]}`)
	if code != http.StatusCreated || !strings.Contains(body, `"version":2`) || !strings.Contains(body, `"archive":false`) {
		t.Fatalf("add a topic: %d %s", code, body)
	}
	// The process that saved has it at once; another within its refresh.
	if _, ok := one.live.Current().Topic("launches"); !ok {
		t.Fatal("the saving process does not have the new topic")
	}
	poll.True(t, 5*time.Second, "the other process sees the new topic", func() bool {
		if err := two.live.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		_, ok := two.live.Current().Topic("launches")
		return ok
	})
	if code, page := sendJSON(t, "GET", two.srv.URL+"/", ""); code != http.StatusOK || !strings.Contains(page, "Product launches") || !strings.Contains(page, `value="launches"`) {
		t.Fatalf("the form of the other process: %d, launches missing:\n%s", code, page)
	}
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "reader@example.com", Topics: []string{"launches"}, Activate: true}); err != nil {
		t.Fatalf("subscribe to the new topic: %v", err)
	}
	if sub, err := st.WithTopics(two.live).Get(ctx, "reader@example.com"); err != nil || len(sub.Topics) != 1 || sub.Topics[0] != "launches" {
		t.Fatalf("the reader's topics: %+v %v", sub.Topics, err)
	}

	// A PUT must name the version read; an older one is refused whole.
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/topics", `{"topics":[]}`); code != http.StatusBadRequest {
		t.Fatalf("PUT without a version: %d %s", code, body)
	}
	var cur struct {
		Version int64               `json:"version"`
		Topics  []catalog.TopicJSON `json:"topics"`
	}
	_, body = sendJSON(t, "GET", one.srv.URL+"/api/topics", "")
	if err := json.Unmarshal([]byte(body), &cur); err != nil {
		t.Fatal(err)
	}
	// Removing a topic is refused: it is retired instead.
	dropped, _ := json.Marshal(map[string]any{"version": cur.Version, "topics": cur.Topics[:2]})
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/topics", string(dropped)); code != http.StatusBadRequest || !strings.Contains(body, "retire") {
		t.Fatalf("remove a topic: %d %s", code, body)
	}
	cur.Topics[2].Retired = true
	cur.Topics[2].Name = "Launches (old)"
	retired, _ := json.Marshal(map[string]any{"version": cur.Version, "topics": cur.Topics})
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/topics", string(retired)); code != http.StatusOK || !strings.Contains(body, `"version":3`) {
		t.Fatalf("retire a topic: %d %s", code, body)
	}
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/topics", string(retired)); code != http.StatusConflict {
		t.Fatalf("a save over version 2 when 3 is stored: %d %s, want 409", code, body)
	}
	if _, page := sendJSON(t, "GET", one.srv.URL+"/", ""); strings.Contains(page, `value="launches"`) {
		t.Fatal("a retired topic is still offered on the form")
	}
	cur.Topics[0].Retired = true
	digestRetired, _ := json.Marshal(map[string]any{"version": 3, "topics": cur.Topics})
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/topics", string(digestRetired)); code != http.StatusBadRequest {
		t.Fatalf("retire the digest: %d %s, want 400", code, body)
	}

	// Every version is kept and can be read back.
	code, body = sendJSON(t, "GET", one.srv.URL+"/api/topics?version=2", "")
	if code != http.StatusOK || !strings.Contains(body, `"name":"Product launches"`) {
		t.Fatalf("version 2: %d %s", code, body)
	}
	if n := auditCount(t, st, audit.TopicsChanged); n != 2 {
		t.Fatalf("audit: %d topics entries, want 2 (added, retired)", n)
	}
}

// TestSequenceAndTemplatesAtRunTime: a step written in the API (subject
// and Markdown) is part of the sequence at once; a step without
// templates, a delay out of order, a template that does not parse or
// names an unknown field are refused and change nothing.
func TestSequenceAndTemplatesAtRunTime(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	one := newCatalogProcess(t, st)
	ctx := context.Background()

	code, body := sendJSON(t, "GET", one.srv.URL+"/api/sequence", "")
	if code != http.StatusOK || !strings.Contains(body, `"template":"welcome"`) || !strings.Contains(body, `"after":"1m0s"`) {
		t.Fatalf("the imported sequence: %d %s", code, body)
	}
	for name, in := range map[string]string{
		"no version":           `{"topic":"digest","steps":[{"template":"welcome","after":"1m"}]}`,
		"not a duration":       `{"version":1,"steps":[{"template":"welcome","after":"3 days"}]}`,
		"out of order":         `{"version":1,"steps":[{"template":"welcome","after":"2h"},{"template":"tips","after":"1h","subject":"Tips","body":"Hi"}]}`,
		"no templates":         `{"version":1,"steps":[{"template":"welcome","after":"1m"},{"template":"nowhere","after":"1h"}]}`,
		"reserved name":        `{"version":1,"steps":[{"template":"welcome","after":"1m"},{"template":"confirm","after":"1h","subject":"S","body":"B"}]}`,
		"unknown field used":   `{"version":1,"steps":[{"template":"welcome","after":"1m"},{"template":"tips","after":"1h","subject":"Tips","body":"Hi {{.Nickname}}"}]}`,
		"body without subject": `{"version":1,"steps":[{"template":"welcome","after":"1m"},{"template":"tips","after":"1h","body":"Hi"}]}`,
		"unknown topic":        `{"version":1,"topic":"nope","steps":[{"template":"welcome","after":"1m"}]}`,
	} {
		if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/sequence", in); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, code, body)
		}
	}
	if c, err := st.Catalog(ctx); err != nil || c.Version != 1 {
		t.Fatalf("refused sequences moved the version to %d (%v)", c.Version, err)
	}
	code, body = sendJSON(t, "PUT", one.srv.URL+"/api/sequence", `{"version":1,"topic":"digest","steps":[{"template":"welcome","after":"1m"},
		{"template":"day-three","after":"72h","subject":"Three days in, {{or .Name \"friend\"}}","body":"# Tips\n\nHello {{.Name}}, read **this**."}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"template":"day-three"`) {
		t.Fatalf("add a step: %d %s", code, body)
	}
	if seq := one.live.Current().Sequence; len(seq.Steps) != 2 || seq.Steps[1].After != 72*time.Hour {
		t.Fatalf("the sequence in effect: %+v", seq)
	}

	// Templates: the built-in text before any save, and refusals.
	code, body = sendJSON(t, "GET", one.srv.URL+"/api/templates/welcome", "")
	if code != http.StatusOK || !strings.Contains(body, `"stored":false`) || !strings.Contains(body, "thank you for confirming") {
		t.Fatalf("the built-in welcome: %d %s", code, body)
	}
	if code, _ := sendJSON(t, "GET", one.srv.URL+"/api/templates/nope", ""); code != http.StatusNotFound {
		t.Fatalf("an unknown template: %d, want 404", code)
	}
	for name, c := range map[string]struct{ in, want string }{
		"does not parse": {`{"version":0,"text":"{{define \"subject\"}}Hi{{end}}{{if}}"}`, "template welcome, text part, line 1: {{if}} needs a value"},
		"unknown field":  {`{"version":0,"text":"{{define \"subject\"}}Hi{{end}}Hello {{.Nickname}}"}`, `template welcome, text part, line 1: \"Nickname\" is not a field you can use here; fields: .Email, .Name`},
		"a name typed without its dot": {`{"version":0,"text":"{{define \"subject\"}}Hi{{end}}\n\nHello {{Nmae}}"}`,
			`template welcome, text part, line 3: \"Nmae\" is not a field or function you can use here (did you mean .Name?)`},
		"no subject": {`{"version":0,"text":"Hello"}`, "subject"},
		"no version": {`{"text":"{{define \"subject\"}}Hi{{end}}Hello"}`, "version"},
	} {
		if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/templates/welcome", c.in); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 saying %s", name, code, body, c.want)
		}
	}
	if c, err := st.Catalog(ctx); err != nil || len(c.Templates) != 0 {
		t.Fatalf("refused templates were stored: %+v %v", c.Templates, err)
	}
	code, body = sendJSON(t, "PUT", one.srv.URL+"/api/templates/welcome", `{"version":0,"text":"{{define \"subject\"}}Hello from {{.Newsletter.Name}}{{end}}Hello {{.Subscriber.Fields.company | default \"there\"}}"}`)
	if code != http.StatusOK || !strings.Contains(body, `"version":1`) {
		t.Fatalf("save a template: %d %s", code, body)
	}
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/templates/welcome", `{"version":0,"text":"{{define \"subject\"}}Again{{end}}Again"}`); code != http.StatusConflict {
		t.Fatalf("a save over the built-in when version 1 is stored: %d %s, want 409", code, body)
	}
	code, body = sendJSON(t, "GET", one.srv.URL+"/api/templates/welcome", "")
	if code != http.StatusOK || !strings.Contains(body, `"stored":true`) || !strings.Contains(body, "Hello from") ||
		!strings.Contains(body, "Welcome!") { // the HTML part is still the built-in one
		t.Fatalf("the stored welcome: %d %s", code, body)
	}
	if code, body := sendJSON(t, "GET", one.srv.URL+"/api/templates/welcome?version=1", ""); code != http.StatusOK || !strings.Contains(body, "Hello from") {
		t.Fatalf("version 1: %d %s", code, body)
	}
	if n := auditCount(t, st, audit.TemplateChanged); n != 1 {
		t.Fatalf("audit: %d template entries, want 1", n)
	}
	if n := auditCount(t, st, audit.SequenceChanged); n != 1 {
		t.Fatalf("audit: %d sequence entries, want 1", n)
	}
}

// auditCount is how many audit entries of action there are.
func auditCount(t *testing.T, st *store.Redis, action string) int {
	t.Helper()
	entries, err := st.AuditEntries(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == action {
			n++
		}
	}
	return n
}

// TestSaveOverAProcessBehind: a save reaching a process that has not yet
// read another process's save (within its refresh) is made over the
// catalog its writer read, not over the older one that process holds:
// a topics PUT there keeps the sequence saved elsewhere, and a sequence
// PUT keeps the topics.
func TestSaveOverAProcessBehind(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	one, two := newCatalogProcess(t, st), newCatalogProcess(t, st)
	ctx := context.Background()

	code, body := sendJSON(t, "PUT", one.srv.URL+"/api/sequence", `{"version":1,"steps":[{"template":"welcome","after":"1m"},
		{"template":"tips","after":"72h","subject":"Tips","body":"Hello"}]}`)
	if code != http.StatusOK {
		t.Fatalf("the sequence through one: %d %s", code, body)
	}
	if two.live.Snapshot().Version != 1 {
		t.Fatal("the second process read the save already: the test shows nothing")
	}
	// The writer read version 2 (from the first process); the PUT reaches
	// the second.
	code, body = sendJSON(t, "PUT", two.srv.URL+"/api/topics", `{"version":2,"topics":[
		{"id":"digest","name":"Weekly digest","default":true},{"id":"updates","name":"Updates, renamed","default":true}]}`)
	if code != http.StatusOK {
		t.Fatalf("the topics through two: %d %s", code, body)
	}
	c, err := st.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Set.Sequence.Steps) != 2 || c.Set.Topics[1].Name != "Updates, renamed" {
		t.Fatalf("version %d lost a change: steps %+v, topics %+v", c.Version, c.Set.Sequence.Steps, c.Set.Topics)
	}
	// And the other way round: one is behind now.
	code, body = sendJSON(t, "PUT", one.srv.URL+"/api/sequence", `{"version":3,"steps":[{"template":"welcome","after":"2m"}]}`)
	if code != http.StatusOK {
		t.Fatalf("the sequence through one, behind: %d %s", code, body)
	}
	if c, err = st.Catalog(ctx); err != nil || c.Set.Topics[1].Name != "Updates, renamed" || len(c.Set.Sequence.Steps) != 1 {
		t.Fatalf("version %d lost the renamed topic: %+v %v", c.Version, c.Set, err)
	}
	// A topic added without a version is added to the newest topics.
	if code, body = sendJSON(t, "POST", two.srv.URL+"/api/topics", `{"id":"launches","name":"Launches"}`); code != http.StatusCreated {
		t.Fatalf("add through two, behind: %d %s", code, body)
	}
	if c, err = st.Catalog(ctx); err != nil || len(c.Set.Sequence.Steps) != 1 || c.Set.Sequence.Steps[0].After != 2*time.Minute || len(c.Set.Topics) != 3 {
		t.Fatalf("version %d after the add: %+v %v", c.Version, c.Set, err)
	}
}
