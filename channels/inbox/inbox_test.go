package inbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

const testSecret = "0123456789abcdef-test-secret"

// book is the people the tests' inboxes know.
type book map[string]channels.Person

func (b book) ByEmail(_ context.Context, email string) (channels.Person, error) {
	if p, ok := b[email]; ok {
		return p, nil
	}
	return channels.Person{}, channels.ErrNoPerson
}

var (
	ana = channels.Person{ID: 7, Email: "ana@example.org"}
	bob = channels.Person{ID: 8, Email: "bob@example.org"}
)

func newTestInbox(t *testing.T, cfg Config) (*Channel, redis.UniversalClient) {
	t.Helper()
	rdb, _ := redistest.Own(t, redistest.DBInbox)
	cfg.Secret = []byte(testSecret)
	c := NewWith(cfg, channels.Env{Redis: rdb, People: book{ana.Email: ana, bob.Email: bob}})
	t.Cleanup(c.CloseStreams)
	return c, rdb
}

// deliver sends the lane's message of event key to person p, as the
// generic lane hands it over.
func deliver(t *testing.T, c *Channel, p channels.Person, key, title, body string) channels.Outcome {
	t.Helper()
	raw, err := json.Marshal(channels.EventMessage{Key: key, Person: p.ID, Topics: []string{"updates"}, Title: title, Body: body, URL: "https://app.example/" + key, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Send(context.Background(), []channels.Message{{To: fmt.Sprint(p.ID), Body: raw}})
	if len(out) != 1 {
		t.Fatalf("Send answered %d outcomes", len(out))
	}
	return out[0]
}

// call makes a reader call signed for p (or with the signature given).
func call(t *testing.T, h http.Handler, method, path string, p channels.Person, hash string) *httptest.ResponseRecorder {
	t.Helper()
	if hash == "" {
		var err error
		if hash, err = Hash([]byte(testSecret), p.Email); err != nil {
			t.Fatal(err)
		}
	}
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("X-Inbox-Subscriber", p.Email)
	r.Header.Set("X-Inbox-Hash", hash)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeList(t *testing.T, w *httptest.ResponseRecorder) listAnswer {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	var a listAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("list: %v in %s", err, w.Body)
	}
	return a
}

func TestInboxListsMarksAndCounts(t *testing.T) {
	c, _ := newTestInbox(t, Config{Keep: 3})
	h := c.Handler()
	for i := range 4 {
		if o := deliver(t, c, ana, fmt.Sprintf("ev:ev_%d", i), fmt.Sprintf("Title %d", i), "**bold** <script>alert(1)</script> [x](javascript:alert(1))"); o.Verdict != channels.Sent {
			t.Fatalf("deliver %d: %v %v", i, o.Verdict, o.Err)
		}
	}
	// A retry of a message delivered before writes nothing again.
	if o := deliver(t, c, ana, "ev:ev_3", "Title 3 again", ""); o.Verdict != channels.Sent {
		t.Fatalf("redeliver: %v", o.Verdict)
	}
	a := decodeList(t, call(t, h, "GET", "/messages", ana, ""))
	if len(a.Messages) != 3 || a.Unread != 3 {
		t.Fatalf("kept %d messages, %d unread; want the newest 3, all unread", len(a.Messages), a.Unread)
	}
	if a.Messages[0].ID != "ev_3" || a.Messages[0].Title != "Title 3" || a.Messages[2].ID != "ev_1" {
		t.Errorf("order or content: %+v", a.Messages)
	}
	body := a.Messages[0].Body
	if !strings.Contains(body, "<strong>bold</strong>") || strings.Contains(body, "<script") || strings.Contains(body, "javascript:") {
		t.Errorf("body not rendered safely: %s", body)
	}
	// Listing marked them seen.
	if a = decodeList(t, call(t, h, "GET", "/messages?limit=1", ana, "")); !a.Messages[0].Seen || a.Next == "" {
		t.Errorf("second list: seen %v next %q", a.Messages[0].Seen, a.Next)
	}
	if b := decodeList(t, call(t, h, "GET", "/messages?limit=5&cursor="+a.Next, ana, "")); len(b.Messages) != 2 || b.Messages[0].ID != "ev_2" {
		t.Errorf("the page after the cursor: %+v", b.Messages)
	}

	if w := call(t, h, "POST", "/messages/ev_2/read", ana, ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"unread":2`) {
		t.Fatalf("read: %d %s", w.Code, w.Body)
	}
	if w := call(t, h, "GET", "/count", ana, ""); !strings.Contains(w.Body.String(), `"unread":2`) {
		t.Errorf("count after a read: %s", w.Body)
	}
	if w := call(t, h, "POST", "/messages/ev_2/unread", ana, ""); !strings.Contains(w.Body.String(), `"unread":3`) {
		t.Errorf("unread: %s", w.Body)
	}
	if w := call(t, h, "POST", "/messages/ev_1/archive", ana, ""); !strings.Contains(w.Body.String(), `"unread":2`) {
		t.Errorf("archive: %s", w.Body)
	}
	if a := decodeList(t, call(t, h, "GET", "/messages?archived=1", ana, "")); len(a.Messages) != 1 || a.Messages[0].ID != "ev_1" {
		t.Errorf("archived list: %+v", a.Messages)
	}
	if w := call(t, h, "POST", "/read-all", ana, ""); w.Code != http.StatusOK {
		t.Errorf("read-all: %d", w.Code)
	}
	if w := call(t, h, "GET", "/count", ana, ""); !strings.Contains(w.Body.String(), `"unread":0`) {
		t.Errorf("count after read-all: %s", w.Body)
	}
	if w := call(t, h, "POST", "/messages/ev_0/read", ana, ""); w.Code != http.StatusNotFound {
		t.Errorf("a message trimmed away: %d", w.Code)
	}
	got, err := c.Unread(context.Background(), ana, "ev:ev_3")
	if err != nil || got != channels.IsRead {
		t.Errorf("Unread after read-all: %v %v", got, err)
	}
	if got, _ := c.Unread(context.Background(), ana, "ev:ev_9"); got != channels.NotDelivered {
		t.Errorf("Unread of a message never sent: %v", got)
	}

	// Export has the person's messages; erase leaves none.
	exp, err := c.Export(context.Background(), ana)
	if err != nil || len(exp.(map[string]any)["messages"].([]Message)) != 3 {
		t.Errorf("export: %v %v", exp, err)
	}
	if err := c.Erase(context.Background(), ana); err != nil {
		t.Fatal(err)
	}
	if a := decodeList(t, call(t, h, "GET", "/messages", ana, "")); len(a.Messages) != 0 || a.Unread != 0 {
		t.Errorf("after erase: %+v", a)
	}
}

func TestInboxSignature(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	h := c.Handler()
	deliver(t, c, ana, "ev:ev_a", "For Ana", "")
	bobHash, err := Hash([]byte(testSecret), bob.Email)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, subscriber, hash string
		code                   int
	}{
		{"another's hash", ana.Email, bobHash, http.StatusForbidden},
		{"no hash", ana.Email, "", http.StatusUnauthorized},
		{"not hex", ana.Email, strings.Repeat("z", 64), http.StatusForbidden},
		{"short", ana.Email, bobHash[:10], http.StatusForbidden},
		{"bad address", "not an address", bobHash, http.StatusBadRequest},
	} {
		r := httptest.NewRequest("GET", "/messages?"+url.Values{"subscriber": {tc.subscriber}, "hash": {tc.hash}}.Encode(), nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code || strings.Contains(w.Body.String(), "For Ana") {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, w.Body, tc.code)
		}
	}
	// The address normalised as the service does: the same signature.
	hash, _ := Hash([]byte(testSecret), "  ANA@Example.org ")
	if a := decodeList(t, call(t, h, "GET", "/messages", channels.Person{Email: "Ana@EXAMPLE.org"}, hash)); len(a.Messages) != 1 {
		t.Errorf("normalised address: %+v", a)
	}
	// Bob's own signature reads Bob's inbox: empty, and no way into Ana's.
	if a := decodeList(t, call(t, h, "GET", "/messages", bob, "")); len(a.Messages) != 0 {
		t.Errorf("bob reads %+v", a.Messages)
	}
	if w := call(t, h, "POST", "/messages/ev_a/read", bob, ""); w.Code != http.StatusNotFound {
		t.Errorf("bob marks ana's message: %d", w.Code)
	}
}

func TestInboxCORS(t *testing.T) {
	c, _ := newTestInbox(t, Config{Origins: []string{"https://app.example"}})
	h := c.Handler()
	for origin, want := range map[string]int{"https://app.example": http.StatusNoContent, "https://evil.example": http.StatusForbidden} {
		r := httptest.NewRequest("OPTIONS", "/messages", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "GET")
		r.Header.Set("Access-Control-Request-Headers", "x-inbox-hash")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		allow := w.Header().Get("Access-Control-Allow-Origin")
		if w.Code != want || (want == http.StatusNoContent) != (allow == origin) {
			t.Errorf("preflight from %s: %d, allow %q", origin, w.Code, allow)
		}
	}
}

// newTestServer serves c's routes; its streams end before it closes
// (httptest's Close waits for every request).
func newTestServer(t *testing.T, c *Channel) *httptest.Server {
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		c.CloseStreams()
		srv.Close()
	})
	return srv
}

// sseEvent is one event read off a stream.
type sseEvent struct{ id, kind, data string }

// openStream opens p's stream on srv (from last, if given) and answers
// its events on a channel, closed when the stream ends.
func openStream(t *testing.T, srv *httptest.Server, p channels.Person, last string) (<-chan sseEvent, func()) {
	t.Helper()
	hash, _ := Hash([]byte(testSecret), p.Email)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/stream?"+url.Values{"subscriber": {p.Email}, "hash": {hash}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.kind != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out, cancel
}

// nextAny is the stream's next event.
func nextAny(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(poll.BusyMachine):
		t.Fatal("no event in time")
	}
	return sseEvent{}
}

// next is the stream's next event of kind, skipping others.
func next(t *testing.T, events <-chan sseEvent, kind string) sseEvent {
	t.Helper()
	deadline := time.After(poll.BusyMachine)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended waiting for %q", kind)
			}
			if ev.kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %q event in time", kind)
		}
	}
}

func TestInboxStreamResumes(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	srv := newTestServer(t, c)

	events, stop := openStream(t, srv, ana, "")
	first := next(t, events, "count")
	if first.data != `{"unread":0}` || first.id == "" {
		t.Fatalf("first event: %+v", first)
	}
	deliver(t, c, ana, "ev:ev_1", "One", "")
	msg := next(t, events, "message")
	if !strings.Contains(msg.data, `"title":"One"`) || strings.Contains(msg.data, `"ms"`) {
		t.Errorf("message event: %s", msg.data)
	}
	count := next(t, events, "count")
	if count.data != `{"unread":1}` {
		t.Errorf("count event: %s", count.data)
	}
	stop()
	// Missed while away: a message and a read.
	deliver(t, c, ana, "ev:ev_2", "Two", "")
	if w := call(t, c.Handler(), "POST", "/messages/ev_1/read", ana, ""); w.Code != http.StatusOK {
		t.Fatal(w.Code)
	}
	events, stop = openStream(t, srv, ana, count.id)
	defer stop()
	// What was missed, in order: Two and its count, the read and its.
	want := []struct{ kind, has string }{
		{"message", `"title":"Two"`}, {"count", `{"unread":2}`},
		{"update", `"id":"ev_1"`}, {"count", `{"unread":1}`},
	}
	for _, w := range want {
		if ev := nextAny(t, events); ev.kind != w.kind || !strings.Contains(ev.data, w.has) {
			t.Errorf("resumed: %s %s, want %s with %s", ev.kind, ev.data, w.kind, w.has)
		}
	}
	// Another person's delivery wakes nothing of Ana's.
	deliver(t, c, bob, "ev:ev_b", "Bob's", "")
	deliver(t, c, ana, "ev:ev_3", "Three", "")
	if ev := next(t, events, "message"); !strings.Contains(ev.data, `"title":"Three"`) {
		t.Errorf("live after resume: %s", ev.data)
	}
}

func TestInboxStreamResetsWhenTrimmedPast(t *testing.T) {
	c, _ := newTestInbox(t, Config{Keep: 1}) // a log of 102 entries
	srv := newTestServer(t, c)
	deliver(t, c, ana, "ev:ev_0", "Zero", "")
	head, err := c.store.head(context.Background(), ana.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // 120 entries: past the cap
		deliver(t, c, ana, fmt.Sprintf("ev:ev_x%d", i), "More", "")
	}
	events, stop := openStream(t, srv, ana, head)
	defer stop()
	if ev := next(t, events, "reset"); ev.id == "" {
		t.Errorf("reset without an id")
	}
	if ev := nextAny(t, events); ev.kind != "count" || ev.data != `{"unread":1}` {
		t.Errorf("after the reset: %s %s, want the count (the newest message kept)", ev.kind, ev.data)
	}
}

func TestInboxStreamBounds(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	srv := newTestServer(t, c)
	var stops []func()
	for range MaxStreamsPerPerson {
		events, stop := openStream(t, srv, ana, "")
		next(t, events, "count")
		stops = append(stops, stop)
	}
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	hash, _ := Hash([]byte(testSecret), ana.Email)
	resp, err := srv.Client().Get(srv.URL + "/stream?" + url.Values{"subscriber": {ana.Email}, "hash": {hash}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream %d of one person: %d", MaxStreamsPerPerson+1, resp.StatusCode)
	}
	// CloseStreams ends them (the server shutting down).
	events, stop := openStream(t, srv, bob, "")
	defer stop()
	next(t, events, "count")
	c.CloseStreams()
	deadline := time.After(poll.BusyMachine)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the stream outlived CloseStreams")
		}
	}
}

func TestReadConfig(t *testing.T) {
	env := map[string]string{"NEWSLETTER_INBOX_SECRET": "short"}
	if _, err := ReadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_INBOX_SECRET") {
		t.Errorf("a short secret: %v", err)
	}
	env = map[string]string{"NEWSLETTER_INBOX_SECRET": testSecret, "NEWSLETTER_INBOX_ORIGINS": "https://a.example, http://localhost:3000", "NEWSLETTER_INBOX_KEEP": "50"}
	cfg, err := ReadConfig(func(k string) string { return env[k] })
	if err != nil || len(cfg.Origins) != 2 || cfg.Keep != 50 || cfg.Days != DefaultDays {
		t.Errorf("config: %+v %v", cfg, err)
	}
	env["NEWSLETTER_INBOX_ORIGINS"] = "https://a.example/path"
	env["NEWSLETTER_INBOX_DAYS"] = "0"
	if _, err := ReadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "ORIGINS") || !strings.Contains(err.Error(), "DAYS") {
		t.Errorf("bad origin and days: %v", err)
	}
}

// TestComponentScript: the web component stays small (docs/channels.md
// promises a script of under 10 KB, no dependencies) and is served as
// JavaScript.
func TestComponentScript(t *testing.T) {
	b, err := assets.ReadFile("assets/inbox.js")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= 10240 {
		t.Errorf("assets/inbox.js is %d bytes, want under 10,240", len(b))
	}
	if !strings.Contains(string(b), "customElements.define('newsletter-inbox'") {
		t.Errorf("assets/inbox.js does not define <newsletter-inbox>")
	}
	c, _ := newTestInbox(t, Config{})
	w := httptest.NewRecorder()
	c.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/inbox.js", nil))
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") || w.Body.String() != string(b) {
		t.Errorf("GET /inbox.js: %d %q, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}
}

// TestInboxPageFormsComeBack: the no-JS page's forms post to the routes
// where the page is, at the server's root as under /inbox (the service
// mounts them there), and a form's post answers 303 back to the page,
// the archived view to the archived view.
func TestInboxPageFormsComeBack(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	deliver(t, c, ana, "ev:ev_1", "One", "")
	deliver(t, c, ana, "ev:ev_2", "Two", "")
	if w := call(t, c.Handler(), "POST", "/messages/ev_2/archive", ana, ""); w.Code != http.StatusOK {
		t.Fatalf("archive: %d", w.Code)
	}
	hash, err := Hash([]byte(testSecret), ana.Email)
	if err != nil {
		t.Fatal(err)
	}
	creds := url.Values{"subscriber": {ana.Email}, "hash": {hash}}.Encode()
	inbox := http.StripPrefix("/inbox", c.Handler())
	for _, tc := range []struct {
		name, page, root string
		h                http.Handler
	}{
		{"at the server's root", "/", "", c.Handler()},
		{"at /inbox", "/inbox", "/inbox", inbox},
		{"at /inbox/", "/inbox/", "/inbox", inbox},
	} {
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, httptest.NewRequest("GET", tc.page+"?"+creds, nil))
		page := w.Body.String()
		for _, want := range []string{
			`action="` + tc.root + `/messages/ev_1/archive?` + strings.ReplaceAll(creds, "&", "&amp;") + `"`,
			`action="` + tc.root + `/read-all?`,
		} {
			if w.Code != http.StatusOK || !strings.Contains(page, want) {
				t.Errorf("%s: the page (%d) has no %s", tc.name, w.Code, want)
			}
		}
		w = httptest.NewRecorder()
		tc.h.ServeHTTP(w, httptest.NewRequest("GET", tc.page+"?archived=1&"+creds, nil))
		if want := `/messages/ev_2/read?` + strings.ReplaceAll(creds, "&", "&amp;") + `&amp;archived=1"`; !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s: the archived page has no %s", tc.name, want)
		}
		for path, back := range map[string]string{
			"/messages/ev_1/read?" + creds:              "?" + creds,
			"/read-all?" + creds:                        "?" + creds,
			"/messages/ev_2/unread?archived=1&" + creds: "?archived=1&" + creds,
		} {
			r := httptest.NewRequest("POST", tc.root+path, strings.NewReader(""))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Accept", "text/html,application/xhtml+xml")
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			want := tc.root + back
			if tc.root == "" {
				want = "/" + back
			}
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
				t.Errorf("%s: POST %s: %d to %q, want 303 to %q", tc.name, path, w.Code, w.Header().Get("Location"), want)
			}
		}
	}
	// A cursor the page never gave is refused, not sent to Redis.
	w := httptest.NewRecorder()
	c.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/?cursor=x&"+creds, nil))
	if w.Code != http.StatusBadRequest {
		t.Errorf("the page with a bad cursor: %d", w.Code)
	}
}

// TestSendRetriesWhileRedisIsAway: with Redis away nothing is lost: each
// message of the batch answers Retry, and the lane holds it as it holds
// every lane's; the same batch once Redis is back is written once.
func TestSendRetriesWhileRedisIsAway(t *testing.T) {
	away := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = away.Close() })
	c := NewWith(Config{Secret: []byte(testSecret)}, channels.Env{Redis: away})
	if o := deliver(t, c, ana, "ev:ev_away", "Held", ""); o.Verdict != channels.Retry || o.Err == nil {
		t.Fatalf("with Redis away: %v %v, want Retry", o.Verdict, o.Err)
	}
	back, _ := newTestInbox(t, Config{})
	for range 2 {
		if o := deliver(t, back, ana, "ev:ev_away", "Held", ""); o.Verdict != channels.Sent {
			t.Fatalf("with Redis back: %v %v", o.Verdict, o.Err)
		}
	}
	if a := decodeList(t, call(t, back.Handler(), "GET", "/messages", ana, "")); len(a.Messages) != 1 {
		t.Errorf("after the retries: %d messages, want 1", len(a.Messages))
	}
}

// TestInboxStreamSkipsMessagesGone: the log names messages; one trimmed
// away before the reader came back is not sent, and the stream goes on
// past it to the one kept.
func TestInboxStreamSkipsMessagesGone(t *testing.T) {
	c, _ := newTestInbox(t, Config{Keep: 1})
	srv := newTestServer(t, c)
	head, err := c.store.head(context.Background(), ana.ID)
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, c, ana, "ev:ev_old", "Old", "")
	deliver(t, c, ana, "ev:ev_new", "New", "")
	events, stop := openStream(t, srv, ana, head)
	defer stop()
	ev := next(t, events, "message")
	if !strings.Contains(ev.data, `"title":"New"`) {
		t.Errorf("the first message sent is %s, want New (Old was trimmed)", ev.data)
	}
}

// TestInboxStreamEdges: someone with no account yet holds no stream
// (their count, then the end, with a minute's retry, whoever else has
// none either); an id past the log's newest gets a reset, not silence;
// a HEAD holds nothing and marks nothing.
func TestInboxStreamEdges(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	srv := newTestServer(t, c)
	for i := range MaxStreamsPerPerson + 2 {
		stranger := channels.Person{Email: fmt.Sprintf("not.yet%d@example.org", i)}
		events, stop := openStream(t, srv, stranger, "")
		if ev := next(t, events, "count"); ev.data != `{"unread":0}` {
			t.Errorf("no account yet: %+v", ev)
		}
		if _, open := <-events; open {
			t.Errorf("the stream of someone with no account yet stays open")
		}
		stop()
	}
	if n := c.OpenStreams(); n != 0 {
		t.Errorf("%d streams held by people with no account", n)
	}

	deliver(t, c, ana, "ev:ev_1", "One", "")
	events, stop := openStream(t, srv, ana, "9999999999999-0")
	defer stop()
	if ev := nextAny(t, events); ev.kind != "reset" {
		t.Errorf("an id past the log: %s %s, want reset", ev.kind, ev.data)
	}
	if ev := nextAny(t, events); ev.kind != "count" || ev.data != `{"unread":1}` {
		t.Errorf("after the reset: %s %s", ev.kind, ev.data)
	}

	for _, path := range []string{"/messages", "/stream", "/"} {
		if w := call(t, c.Handler(), "HEAD", path, ana, ""); w.Code != http.StatusMethodNotAllowed {
			t.Errorf("HEAD %s: %d", path, w.Code)
		}
	}
	if m, err := c.store.one(context.Background(), ana.ID, "ev_1"); err != nil || m.Seen {
		t.Errorf("after the HEADs the message is seen (%v)", err)
	}
}
