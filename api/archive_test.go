package api_test

// The archive's tests live outside package api so that they can render
// with the mailer's own Markdown renderer, as the binary does (the api
// package itself never imports the mailer).

import (
	"context"
	"encoding/xml"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

const archiveTopics = `topics:
- {id: digest, name: Weekly digest}
- {id: updates, name: Product updates}
- {id: team, name: Team notes, archive: false}
`

// countHook counts the Redis commands of a client (a pipeline's each).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type archiveEnv struct {
	st    *store.Redis
	set   *topics.Set
	hook  *countHook
	fail  *failHook
	clock *clock
	srv   *httptest.Server
}

var realMarkdown = api.MarkdownFunc(func(src string) (template.HTML, error) {
	b, err := mailer.RenderMarkdown(src)
	return b.HTML, err
})

func newArchiveEnv(t *testing.T) *archiveEnv {
	t.Helper()
	set, err := topics.Parse([]byte(archiveTopics), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rdb, _ := redistest.New(t, redistest.DBAPI)
	c := &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	e := &archiveEnv{st: store.NewRedis(rdb).WithTopics(set).WithClock(c.Now), set: set, hook: &countHook{}, fail: &failHook{}, clock: c}
	rdb.AddHook(e.hook)
	rdb.AddHook(e.fail)
	e.srv = e.server(t)
	return e
}

// server is a new process's API over the same store.
func (e *archiveEnv) server(t *testing.T) *httptest.Server {
	t.Helper()
	s := api.New(api.Config{Topics: e.set, Origin: "https://news.example.com", Publisher: "Example News"},
		api.Deps{Store: e.st, Archive: e.st, Markdown: realMarkdown, Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// publish creates an issue and takes it through sending to sent, as the
// planner and the batches do.
func (e *archiveEnv) publish(t *testing.T, subject, body string, send bool, topicIDs ...string) store.Issue {
	t.Helper()
	ctx := context.Background()
	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: subject, Preheader: "About " + subject, Body: body, Topics: topicIDs}, "")
	if err != nil {
		t.Fatal(err)
	}
	if send {
		sendAsIs(t, e, is.ID)
	}
	return is
}

// seed: two public sent issues, one private, one half private, a draft.
func (e *archiveEnv) seed(t *testing.T) {
	t.Helper()
	e.publish(t, "First letter", "Hello **readers**, see [our site](https://example.com/).", true, "digest")
	e.publish(t, "Team only", "Internal", true, "team")
	e.publish(t, "Mixed audience", "Partly internal", true, "digest", "team")
	e.publish(t, "Draft letter", "Not yet", false, "digest")
	e.publish(t, "Second letter", "<script>alert(1)</script>\n\n[click](javascript:alert(2)) and <img src=x onerror=alert(3)>", true, "updates")
}

func get(t *testing.T, u string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestArchiveListsPublicSentIssuesNewestFirst(t *testing.T) {
	e := newArchiveEnv(t)
	resp, body := get(t, e.srv.URL+"/archive")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Nothing has been sent yet") {
		t.Fatalf("empty archive: %d %s", resp.StatusCode, body)
	}
	e.clock.Add(api.DefaultArchiveRecheck)
	e.seed(t)
	resp, body = get(t, e.srv.URL+"/archive")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	second, first := strings.Index(body, `href="/archive/second-letter"`), strings.Index(body, `href="/archive/first-letter"`)
	if second < 0 || first < 0 || second > first {
		t.Fatalf("want second then first letter:\n%s", body)
	}
	for _, hidden := range []string{"Team only", "Mixed audience", "Draft letter"} {
		if strings.Contains(body, hidden) {
			t.Errorf("the archive lists %q", hidden)
		}
	}
	if resp.Header.Get("Cache-Control") != "public, max-age=60" || resp.Header.Get("ETag") == "" {
		t.Errorf("headers %v", resp.Header)
	}
}

func TestArchivePageIsTheIssueWithoutPersonalLinks(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	resp, body := get(t, e.srv.URL+"/archive/first-letter")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"<h1>First letter</h1>", "Hello <strong>readers</strong>", `<a href="https://example.com/">our site</a>`, `datetime="2026-03-01T09:00:00Z"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	// Nothing of a reader: no token, no unsubscribe or preferences link, no address.
	main := strings.ToLower(body[strings.Index(body, "<main"):])
	for _, personal := range []string{"token", "unsubscribe", "preferences", "@"} {
		if strings.Contains(main, personal) {
			t.Errorf("page carries %q:\n%s", personal, body)
		}
	}
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "public, max-age=300" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("headers %v", resp.Header)
	}
	if resp, body := get(t, e.srv.URL+"/archive/first-letter", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || body != "" {
		t.Fatalf("conditional get: %d %q", resp.StatusCode, body)
	}
	// What the writer typed never becomes active content.
	_, body = get(t, e.srv.URL+"/archive/second-letter")
	if strings.Contains(body, "<script") || strings.Contains(body, `href="javascript:`) || strings.Contains(body, "<img src=x") {
		t.Errorf("active content on the page:\n%s", body)
	}
	// Unknown, unsent, private (alone or with a public topic), not a slug: all 404.
	for _, path := range []string{"/archive/nothing-here", "/archive/draft-letter", "/archive/team-only", "/archive/mixed-audience", "/archive/Bad%20Slug", "/archive/..%2fadmin"} {
		if resp, body := get(t, e.srv.URL+path); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "Partly internal") || strings.Contains(body, "Internal") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// Atom (RFC 4287), decoded strictly: the elements a feed and its entries
// must have (4.1.1, 4.1.2), ids absolute IRIs, dates RFC 3339.
type atomDoc struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string   `xml:"http://www.w3.org/2005/Atom id"`
	Title   string   `xml:"http://www.w3.org/2005/Atom title"`
	Updated string   `xml:"http://www.w3.org/2005/Atom updated"`
	Authors []struct {
		Name string `xml:"http://www.w3.org/2005/Atom name"`
	} `xml:"http://www.w3.org/2005/Atom author"`
	Links []struct {
		Rel  string `xml:"rel,attr"`
		Href string `xml:"href,attr"`
	} `xml:"http://www.w3.org/2005/Atom link"`
	Entries []struct {
		ID      string `xml:"http://www.w3.org/2005/Atom id"`
		Title   string `xml:"http://www.w3.org/2005/Atom title"`
		Updated string `xml:"http://www.w3.org/2005/Atom updated"`
		Links   []struct {
			Rel  string `xml:"rel,attr"`
			Href string `xml:"href,attr"`
		} `xml:"http://www.w3.org/2005/Atom link"`
		Content struct {
			Type string `xml:"type,attr"`
			Body string `xml:",chardata"`
		} `xml:"http://www.w3.org/2005/Atom content"`
	} `xml:"http://www.w3.org/2005/Atom entry"`
}

func parseAtom(t *testing.T, body string) atomDoc {
	t.Helper()
	var f atomDoc
	d := xml.NewDecoder(strings.NewReader(body))
	d.Strict = true
	if err := d.Decode(&f); err != nil {
		t.Fatalf("not Atom: %v\n%s", err, body)
	}
	absolute := func(what, s string) {
		if u, err := url.Parse(s); err != nil || !u.IsAbs() {
			t.Errorf("%s %q: not an absolute IRI", what, s)
		}
	}
	date := func(what, s string) {
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			t.Errorf("%s %q: not an RFC 3339 date", what, s)
		}
	}
	absolute("feed id", f.ID)
	date("feed updated", f.Updated)
	if f.Title == "" || len(f.Authors) == 0 || f.Authors[0].Name == "" {
		t.Errorf("feed title %q authors %+v", f.Title, f.Authors)
	}
	rels := map[string]string{}
	for _, l := range f.Links {
		rels[l.Rel] = l.Href
	}
	if rels["self"] == "" || rels["alternate"] != "https://news.example.com/archive" {
		t.Errorf("feed links %+v", f.Links)
	}
	seen := map[string]bool{}
	for _, en := range f.Entries {
		absolute("entry id", en.ID)
		date("entry updated", en.Updated)
		if seen[en.ID] || en.Title == "" || en.Content.Type != "html" || en.Content.Body == "" || len(en.Links) == 0 || en.Links[0].Rel != "alternate" {
			t.Errorf("entry %+v", en)
		}
		seen[en.ID] = true
	}
	return f
}

func TestArchiveFeedIsValidAtomWithStableIDs(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	resp, body := get(t, e.srv.URL+"/archive/feed.atom")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/atom+xml; charset=utf-8" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	f := parseAtom(t, body)
	if len(f.Entries) != 2 || f.Entries[0].ID != "https://news.example.com/archive/second-letter" || f.Entries[1].ID != "https://news.example.com/archive/first-letter" {
		t.Fatalf("entries %+v", f.Entries)
	}
	if f.Entries[1].Links[0].Href != f.Entries[1].ID || !strings.Contains(f.Entries[1].Content.Body, "Hello <strong>readers</strong>") {
		t.Fatalf("first letter's entry %+v", f.Entries[1])
	}
	if f.Title != "Example News" || f.Updated != "2026-03-01T09:00:00Z" {
		t.Fatalf("feed %q %q", f.Title, f.Updated)
	}
	// A restart (a new process over the same store) serves the same feed.
	_, again := get(t, e.server(t).URL+"/archive/feed.atom")
	if again != body {
		t.Fatalf("the feed changed across a restart:\n%s\n%s", body, again)
	}
	// One topic's feed; a private or unknown topic has none.
	_, body = get(t, e.srv.URL+"/archive/feed.atom?topic=updates")
	if f := parseAtom(t, body); len(f.Entries) != 1 || f.Entries[0].Title != "Second letter" || f.ID != "https://news.example.com/archive/feed.atom?topic=updates" {
		t.Fatalf("updates feed %+v", f)
	}
	for _, q := range []string{"team", "nope"} {
		if resp, _ := get(t, e.srv.URL+"/archive/feed.atom?topic="+q); resp.StatusCode != http.StatusNotFound {
			t.Errorf("topic %s: %d", q, resp.StatusCode)
		}
	}
}

func TestArchiveCacheCostsNoRedisAfterTheFirstRequest(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	paths := []string{"/archive", "/archive/first-letter", "/archive/feed.atom", "/archive/feed.atom?topic=digest", "/archive/nothing-here"}
	first := map[string]string{}
	for _, p := range paths {
		_, first[p] = get(t, e.srv.URL+p)
	}
	before := e.hook.n.Load()
	for range 20 {
		for _, p := range paths {
			if _, body := get(t, e.srv.URL+p); body != first[p] {
				t.Fatalf("%s changed", p)
			}
		}
	}
	if n := e.hook.n.Load() - before; n != 0 {
		t.Fatalf("%d Redis commands for 100 cached requests, want 0", n)
	}
	// When the generation is due, one read serves every request.
	e.clock.Add(api.DefaultArchiveRecheck)
	for range 10 {
		for _, p := range paths {
			get(t, e.srv.URL+p)
		}
	}
	if n := e.hook.n.Load() - before; n != 1 {
		t.Fatalf("%d Redis commands after the recheck interval, want 1 (the generation)", n)
	}
	// A newly sent issue shows at the next check, and only then.
	e.publish(t, "Third letter", "New", true, "digest")
	if _, body := get(t, e.srv.URL+"/archive"); strings.Contains(body, "Third letter") {
		t.Fatal("shown before the recheck interval: the cache read Redis")
	}
	e.clock.Add(api.DefaultArchiveRecheck)
	if _, body := get(t, e.srv.URL+"/archive"); !strings.Contains(body, "Third letter") {
		t.Fatalf("the new issue is missing after the recheck:\n%s", body)
	}
	if resp, _ := get(t, e.srv.URL+"/archive/third-letter"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new issue's page (a 404 before): %d", resp.StatusCode)
	}
}

func TestArchiveServesStalePagesWhenRedisFails(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	_, body := get(t, e.srv.URL+"/archive/first-letter")
	e.fail.on.Store(true)
	e.clock.Add(api.DefaultArchiveRecheck)
	resp, again := get(t, e.srv.URL+"/archive/first-letter")
	if resp.StatusCode != http.StatusOK || again != body {
		t.Fatalf("cached page not served while Redis fails: %d", resp.StatusCode)
	}
	if resp, _ := get(t, e.srv.URL+"/archive/never-cached"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("uncached page while Redis fails: %d, want 503", resp.StatusCode)
	}
}

// failHook fails every command once on.
type failHook struct{ on atomic.Bool }

func (h *failHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}
func (h *failHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmds)
	}
}

// A burst of requests for a page nobody asked for yet builds it once.
func TestArchiveBurstBuildsAPageOnce(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	get(t, e.srv.URL+"/archive") // reads the generation
	before := e.hook.n.Load()
	var wg sync.WaitGroup
	bodies := make([]string, 30)
	for i := range bodies {
		wg.Go(func() { // no t.Fatal off the test's goroutine: the check below fails
			if resp, err := http.Get(e.srv.URL + "/archive/first-letter"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				bodies[i] = string(b)
			}
		})
	}
	wg.Wait()
	for _, b := range bodies {
		if !strings.Contains(b, "<h1>First letter</h1>") {
			t.Fatalf("burst answer %q", b)
		}
	}
	// One IssueBySlug: HGET of the slug, HGETALL of the issue.
	if n := e.hook.n.Load() - before; n > 2 {
		t.Fatalf("%d Redis commands for a burst of 30 on one page, want one build (2)", n)
	}
}

// An issue sent to a segment was written for those people: the archive
// neither lists nor serves it, whatever its topics, and its feed leaves
// it out.
func TestArchiveHidesSegmentIssues(t *testing.T) {
	e := newArchiveEnv(t)
	ctx := context.Background()
	sub, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: "beta@x.io", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.AddTags(ctx, sub.ID, []string{"beta"}); err != nil {
		t.Fatal(err)
	}
	seg, err := e.st.CreateSegment(ctx, "Beta", "tag:beta")
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, "Public letter", "For all", true, "digest")
	for _, c := range []store.IssueContent{
		{Subject: "Beta only", Body: "Secret plans", Segment: seg.ID},
		{Subject: "Beta digest readers", Body: "Secret too", Topics: []string{"digest"}, Segment: seg.ID},
	} {
		is, err := e.st.CreateIssue(ctx, c, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
			t.Fatal(err)
		}
		if err := e.st.AdvanceIssuePlan(ctx, is.ID, 1, store.WalkByShard, 0, 0, true); err != nil {
			t.Fatal(err)
		}
		if done, err := e.st.FinishIssue(ctx, is.ID); err != nil || !done {
			t.Fatalf("finish %q: %v %v", c.Subject, done, err)
		}
		if resp, body := get(t, e.srv.URL+"/archive/"+is.Slug); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "Secret") {
			t.Fatalf("%s served: %d %s", c.Subject, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/archive/", "/archive/feed.atom"} {
		resp, body := get(t, e.srv.URL+path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Public letter") || strings.Contains(body, "Beta") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}
