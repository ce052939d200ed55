package engage_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/store"
)

const (
	browser = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15"
	issue   = int64(42)
)

var targets = []string{"https://example.com/first", "https://example.com/second?a=1&b=2"}

// rig is the counted redirect over real HTTP, on the real store.
type rig struct {
	t     testing.TB
	keys  *engage.Keys
	st    *store.Redis
	fault *redisfault.Fault
	h     *engage.Handler
	srv   *httptest.Server
	sent  time.Time

	mu  sync.Mutex
	now time.Time
}

func newRig(t testing.TB, mode engage.Mode, opens bool, rc engage.RecorderConfig) *rig {
	c, _ := redistest.New(t, redistest.DBEngage)
	f := redisfault.Add(c)
	st := store.NewRedis(c)
	if err := st.SetIssueLinks(context.Background(), issue, targets); err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	r := &rig{t: t, keys: engage.NewKeys([]byte("0123456789abcdef")), st: st, fault: f, sent: sent, now: sent.Add(time.Hour)}
	if rc.FlushEvery == 0 {
		rc.FlushEvery = -1 // the tests flush themselves
	}
	m := engage.NewMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := engage.NewRecorder(st, rc, m, log)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rec.Close(ctx)
	})
	r.h = &engage.Handler{Keys: r.keys, Links: st, Recorder: rec, Classify: &engage.Classifier{}, Mode: mode, Opens: opens,
		Metrics: m, Log: log, Now: r.clock}
	mux := http.NewServeMux()
	r.h.Register(mux)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *rig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func (r *rig) setNow(t time.Time) {
	r.mu.Lock()
	r.now = t
	r.mu.Unlock()
}

// url is the link of index for reader, as their mail carries it.
func (r *rig) url(route string, what engage.What, index int, reader int64) string {
	return r.srv.URL + route + engage.Token(r.keys.LinkPart(what, issue, index), r.keys.ReaderPart(issue, reader, r.sent))
}

// get requests u without following a redirect.
func (r *rig) get(method, u, ua string) *http.Response {
	r.t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("User-Agent", ua)
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// follow clicks and wants the redirect to target.
func (r *rig) follow(method, u, ua, target string) {
	r.t.Helper()
	resp := r.get(method, u, ua)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target {
		r.t.Fatalf("%s %s: %d to %q, want 302 to %q", method, u, resp.StatusCode, resp.Header.Get("Location"), target)
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" {
		r.t.Fatalf("the redirect lets the token travel on in a Referer: %q", resp.Header.Get("Referrer-Policy"))
	}
}

func (r *rig) engagement() store.Engagement {
	r.t.Helper()
	if err := r.h.Recorder.Flush(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	e, err := r.st.IssueEngagement(context.Background(), issue)
	if err != nil {
		r.t.Fatal(err)
	}
	return e
}

// A reader who clicks a link three times is three clicks and one reader;
// a second reader on the same link makes two.
func TestReaderCountedOnce(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{})
	for range 3 {
		r.follow("GET", r.url("/r/", engage.Link, 0, 7), browser, targets[0])
	}
	e := r.engagement()
	if e.Links[0].Clicks != 3 || e.Links[0].UniqueClickers != 1 || e.UniqueClickers != 1 || e.MachineClicks != 0 {
		t.Fatalf("one reader, three clicks: %+v", e)
	}
	r.follow("GET", r.url("/r/", engage.Link, 0, 7), browser, targets[0]) // in a later flush: still one reader
	r.follow("GET", r.url("/r/", engage.Link, 1, 8), browser, targets[1])
	e = r.engagement()
	if e.Links[0].Clicks != 4 || e.Links[0].UniqueClickers != 1 || e.Links[1].UniqueClickers != 1 || e.UniqueClickers != 2 || e.Clicks != 5 {
		t.Fatalf("two readers: %+v", e)
	}
	if len(e.Hours) != 1 || e.Hours[0].Clicks != 5 || !e.Hours[0].Hour.Equal(r.sent.Add(time.Hour)) {
		t.Fatalf("hours: %+v", e.Hours)
	}
}

// Scanners still get the redirect (or nothing, for the honeypot), but
// are counted as machines, never as readers: a HEAD, a scanner's agent,
// a click seconds after the mail was made, and any click of a mail whose
// hidden honeypot link was followed.
func TestScannersCountedApart(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{})
	r.follow("HEAD", r.url("/r/", engage.Link, 0, 7), browser, targets[0])
	r.follow("GET", r.url("/r/", engage.Link, 0, 7), "Mozilla/5.0 (compatible; Barracuda Sentinel)", targets[0])
	r.follow("GET", r.url("/r/", engage.Link, 0, 7), "", targets[0])
	r.setNow(r.sent.Add(2 * time.Second))
	r.follow("GET", r.url("/r/", engage.Link, 1, 7), browser, targets[1])
	r.setNow(r.sent.Add(time.Hour))
	if resp := r.get("GET", r.url("/r/", engage.Honeypot, 0, 9), browser); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Location") != "" {
		t.Fatalf("honeypot: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	r.follow("GET", r.url("/r/", engage.Link, 1, 9), browser, targets[1]) // reader 9's mail is a scanner's now
	e := r.engagement()
	if e.Clicks != 0 || e.UniqueClickers != 0 || e.Links[0].MachineClicks != 3 || e.Links[1].MachineClicks != 2 {
		t.Fatalf("scanners: %+v", e)
	}
	// A person's click of another mail is theirs; after the honeypot's
	// window, reader 9's are too.
	r.follow("GET", r.url("/r/", engage.Link, 1, 10), browser, targets[1])
	r.setNow(r.sent.Add(time.Hour + engage.HoneypotWindow + time.Second))
	r.follow("GET", r.url("/r/", engage.Link, 1, 9), browser, targets[1])
	e = r.engagement()
	if e.Links[1].Clicks != 2 || e.Links[1].UniqueClickers != 2 || e.Links[1].MachineClicks != 2 {
		t.Fatalf("people after scanners: %+v", e.Links[1])
	}
}

// A token we did not sign redirects nowhere: tampered, a link part of
// another key, an index the issue has not, a reader part of another
// issue, the pixel's token on the redirect.
func TestRefusesLinksItDidNotSign(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{})
	good := engage.Token(r.keys.LinkPart(engage.Link, issue, 0), r.keys.ReaderPart(issue, 7, r.sent))
	other := engage.NewKeys([]byte("another secret!!"))
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for name, tok := range map[string]string{
		"tampered link part":   flip(good, 3),
		"tampered reader part": flip(good, len(good)-3),
		"no reader part":       r.keys.LinkPart(engage.Link, issue, 0),
		"another key":          engage.Token(other.LinkPart(engage.Link, issue, 0), other.ReaderPart(issue, 7, r.sent)),
		"an index not signed":  strings.Replace(good, r.keys.LinkPart(engage.Link, issue, 0), flip(r.keys.LinkPart(engage.Link, issue, 1), 0), 1),
		"an index it has not":  engage.Token(r.keys.LinkPart(engage.Link, issue, 5), r.keys.ReaderPart(issue, 7, r.sent)),
		"another issue reader": engage.Token(r.keys.LinkPart(engage.Link, issue, 0), r.keys.ReaderPart(issue+1, 7, r.sent)),
		"the pixel's token":    engage.Token(r.keys.LinkPart(engage.Pixel, issue, 0), r.keys.ReaderPart(issue, 7, r.sent)),
		"garbage":              "not-a-token",
	} {
		resp := r.get("GET", r.srv.URL+"/r/"+tok, browser)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d, Location %q; want 404 and no redirect", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	r.follow("GET", r.srv.URL+"/r/"+good, browser, targets[0])
	if e := r.engagement(); e.Clicks != 1 {
		t.Fatalf("only the signed click counts: %+v", e)
	}
}

// While Redis is away the redirect still redirects (the links read
// before are in memory) and the counts wait in the buffer, up to its
// bound (the rest dropped and counted); once Redis is back they are
// written.
func TestCountsWaitForRedis(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{MaxPending: 3})
	r.follow("GET", r.url("/r/", engage.Link, 0, 7), browser, targets[0]) // reads the links
	r.fault.Down()
	r.follow("GET", r.url("/r/", engage.Link, 0, 8), browser, targets[0])
	r.follow("GET", r.url("/r/", engage.Link, 1, 8), browser, targets[1])
	if err := r.h.Recorder.Flush(context.Background()); err == nil {
		t.Fatal("a flush with Redis away succeeded")
	}
	r.follow("GET", r.url("/r/", engage.Link, 1, 9), browser, targets[1]) // past the bound: dropped
	if n := testutil.ToFloat64(r.h.Metrics.Events.WithLabelValues("click", "dropped")); n != 1 {
		t.Fatalf("dropped clicks: %v, want 1", n)
	}
	if got := r.h.Recorder.Pending(); got != 3 {
		t.Fatalf("pending: %d, want 3", got)
	}
	r.fault.Heal()
	var e store.Engagement
	poll.Until(t, 10*time.Second, func() error {
		if err := r.h.Recorder.Flush(context.Background()); err != nil {
			return err
		}
		var err error
		e, err = r.st.IssueEngagement(context.Background(), issue)
		return err
	})
	if e.Clicks != 3 || e.UniqueClickers != 2 || e.Links[0].Clicks != 2 || e.Links[1].Clicks != 1 {
		t.Fatalf("after the outage: %+v", e)
	}
}

// An unknown issue's links with Redis away: a clear 503, no redirect.
func TestUnknownLinksWithRedisAway(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{})
	r.fault.Down()
	resp := r.get("GET", r.url("/r/", engage.Link, 0, 7), browser)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Location") != "" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Per-person mode keeps the person's click in their personal data;
// aggregate mode does not.
func TestPerPersonClicks(t *testing.T) {
	for _, mode := range []engage.Mode{engage.Aggregate, engage.PerPerson} {
		t.Run(string(mode), func(t *testing.T) {
			keep := time.Duration(0)
			if mode == engage.PerPerson {
				keep = 90 * 24 * time.Hour
			}
			r := newRig(t, mode, false, engage.RecorderConfig{PerPersonKeep: keep})
			sub, err := r.st.Subscribe(context.Background(), store.SubscribeRequest{Email: "reader@example.com", Activate: true})
			if err != nil {
				t.Fatal(err)
			}
			r.setNow(time.Now()) // the kept clicks expire from the real now
			r.sent = time.Now().Add(-time.Hour)
			r.follow("GET", r.url("/r/", engage.Link, 1, sub.ID), browser, targets[1])
			r.engagement()
			pd, err := r.st.PersonalData(context.Background(), sub.Email)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if mode == engage.PerPerson {
				want = 1
			}
			if len(pd.Clicks) != want || (want == 1 && (pd.Clicks[0].Issue != issue || pd.Clicks[0].Link != 1)) {
				t.Fatalf("personal data's clicks: %+v, want %d", pd.Clicks, want)
			}
			if _, err := r.st.Erase(context.Background(), sub.Email); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Opens: a person's load of the pixel is an open, a mail-privacy
// proxy's a machine open; with opens off, the pixel is served and
// nothing counted.
func TestOpens(t *testing.T) {
	r := newRig(t, engage.Aggregate, true, engage.RecorderConfig{})
	for _, ua := range []string{browser, browser, "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"} {
		resp := r.get("GET", r.url("/o/", engage.Pixel, 0, 7), ua)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/gif" {
			t.Fatalf("pixel: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	e := r.engagement()
	if e.Opens != 2 || e.UniqueOpeners != 1 || e.MachineOpens != 2 || e.Clicks != 0 {
		t.Fatalf("opens: %+v", e)
	}
	if resp := r.get("GET", r.url("/o/", engage.Link, 0, 7), browser); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a link's token as a pixel: %d", resp.StatusCode)
	}
	off := newRig(t, engage.Aggregate, false, engage.RecorderConfig{})
	if resp := off.get("GET", off.url("/o/", engage.Pixel, 0, 7), browser); resp.StatusCode != http.StatusOK {
		t.Fatalf("pixel with opens off: %d", resp.StatusCode)
	}
	if e := off.engagement(); e.Opens != 0 || e.MachineOpens != 0 {
		t.Fatalf("opens counted with opens off: %+v", e)
	}
}

// The buffer is written on its own (every FlushEvery) and by Close (at
// shutdown), with no Flush called.
func TestWrittenInBackgroundAndAtClose(t *testing.T) {
	r := newRig(t, engage.Aggregate, false, engage.RecorderConfig{FlushEvery: 10 * time.Millisecond})
	r.follow("GET", r.url("/r/", engage.Link, 0, 7), browser, targets[0])
	poll.Until(t, 10*time.Second, func() error {
		e, err := r.st.IssueEngagement(context.Background(), issue)
		if err == nil && e.Clicks != 1 {
			err = fmt.Errorf("clicks %d", e.Clicks)
		}
		return err
	})
	closing := newRig(t, engage.Aggregate, false, engage.RecorderConfig{FlushEvery: time.Hour})
	closing.follow("GET", closing.url("/r/", engage.Link, 1, 7), browser, targets[1])
	if err := closing.h.Recorder.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, err := closing.st.IssueEngagement(context.Background(), issue); err != nil || e.Links[1].Clicks != 1 {
		t.Fatalf("after Close: %+v, %v", e, err)
	}
}

// The body's links become counted ones, numbered by first appearance,
// the same target the same number in the HTML and the text; the
// service's own links, mail addresses and images are left alone.
func TestRewrite(t *testing.T) {
	html := `<p><a href="https://a.example/x?p=1&amp;q=2">A</a> <a href="mailto:x@y.z">m</a> <a href="https://news.example.com/archive/x">own</a>` +
		` <img src="https://a.example/img.png"> <a title="t" href="https://b.example/">B</a> <a href="https://a.example/x?p=1&amp;q=2">A again</a></p>`
	text := "A [1] B [2]\n\n[1]: https://a.example/x?p=1&q=2\n[2]: https://b.example/.\nhttps://c.example/ is not a link of the HTML\n"
	rw := engage.Rewrite(html, text, "https://news.example.com", func(i int) string { return fmt.Sprintf("https://news.example.com/r/L%d.M", i) })
	if len(rw.URLs) != 2 || rw.URLs[0] != "https://a.example/x?p=1&q=2" || rw.URLs[1] != "https://b.example/" {
		t.Fatalf("urls: %q", rw.URLs)
	}
	for _, want := range []string{`<a href="https://news.example.com/r/L0.M">A</a>`, `<a title="t" href="https://news.example.com/r/L1.M">B</a>`,
		`<a href="https://news.example.com/r/L0.M">A again</a>`, `href="mailto:x@y.z"`, `href="https://news.example.com/archive/x"`, `src="https://a.example/img.png"`} {
		if !strings.Contains(rw.HTML, want) {
			t.Errorf("html lacks %s:\n%s", want, rw.HTML)
		}
	}
	for _, want := range []string{"[1]: https://news.example.com/r/L0.M\n", "[2]: https://news.example.com/r/L1.M.\n", "https://c.example/ is not"} {
		if !strings.Contains(rw.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, rw.Text)
		}
	}
}

// TestRewriteKeepsAddressTexts: a link whose text is an address (a bare
// URL Markdown made a link of, a www. one, one in bold) keeps its href,
// so the host the reader sees is the host it leads to; it is not
// counted. A link with words for its text to the same target is.
func TestRewriteKeepsAddressTexts(t *testing.T) {
	html := `<p><a href="https://a.example/x">https://a.example/x</a> <a href="http://www.b.example">www.b.example</a>` +
		` <a href="https://c.example/"><strong>HTTPS://c.example/</strong></a> <a href="https://a.example/x">the notes</a></p>`
	rw := engage.Rewrite(html, "", "https://news.example.com", func(i int) string { return fmt.Sprintf("https://news.example.com/r/L%d.M", i) })
	for _, want := range []string{`<a href="https://a.example/x">https://a.example/x</a>`, `<a href="http://www.b.example">www.b.example</a>`,
		`<a href="https://c.example/"><strong>HTTPS://c.example/</strong></a>`, `<a href="https://news.example.com/r/L0.M">the notes</a>`} {
		if !strings.Contains(rw.HTML, want) {
			t.Errorf("html lacks %s:\n%s", want, rw.HTML)
		}
	}
	if len(rw.URLs) != 1 || rw.URLs[0] != "https://a.example/x" {
		t.Fatalf("urls: %q", rw.URLs)
	}
}

// TestTestLinksLeadOnUncounted: a test send's link leads to its target
// and counts nothing; its token does not lead elsewhere (another target,
// a changed token), nor anywhere after engage.TestLinkTTL.
func TestTestLinksLeadOnUncounted(t *testing.T) {
	r := newRig(t, engage.PerPerson, true, engage.RecorderConfig{})
	target := "https://example.org/not-stored?a=1&b=2"
	u := r.keys.TestLink(r.srv.URL, issue, target, r.clock())
	if !strings.HasPrefix(u, r.srv.URL+"/r/") {
		t.Fatalf("test link %s", u)
	}
	r.follow("GET", u, browser, target)
	if e := r.engagement(); e.Clicks != 0 || e.MachineClicks != 0 || e.UniqueClickers != 0 {
		t.Fatalf("a test link was counted: %+v", e)
	}
	tok := strings.TrimPrefix(u[:strings.Index(u, "?")], r.srv.URL+"/r/")
	for _, bad := range []string{
		r.srv.URL + "/r/" + tok + "?u=" + url.QueryEscape("https://evil.example/"),
		r.srv.URL + "/r/" + tok,
		r.srv.URL + "/r/" + tok + "x?u=" + url.QueryEscape(target),
	} {
		if resp := r.get("GET", bad, browser); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", bad, resp.StatusCode)
		}
	}
	// After engage.TestLinkTTL the test link leads nowhere.
	r.setNow(r.clock().Add(engage.TestLinkTTL + time.Hour))
	if resp := r.get("GET", u, browser); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a test link past its time: %d, want 404", resp.StatusCode)
	}
	rw := engage.RewriteTo(`<a href="https://a.example/x">the notes</a>`, "See https://a.example/x.", "https://news.example.com",
		func(_ int, target string) string {
			return r.keys.TestLink("https://news.example.com", issue, target, r.sent)
		})
	want := r.keys.TestLink("https://news.example.com", issue, "https://a.example/x", r.sent)
	if !strings.Contains(rw.HTML, html.EscapeString(want)) || !strings.Contains(rw.Text, want+".") {
		t.Fatalf("test rewrite:\n%s\n%s", rw.HTML, rw.Text)
	}
}
