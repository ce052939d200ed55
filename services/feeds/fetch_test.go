package feeds

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
)

const rss = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Blog</title><link>https://blog.example/</link>
<item><title>Second &amp; newest</title><link>https://blog.example/2</link><guid>post-2</guid>
  <pubDate>Tue, 03 Feb 2026 10:00:00 GMT</pubDate><description>&lt;p&gt;Hello &lt;b&gt;world&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/p&gt;</description></item>
<item><title>First</title><link>/1</link><guid>post-1</guid><pubDate>Mon, 02 Feb 2026 10:00:00 GMT</pubDate></item>
<item><title>Bad link</title><link>javascript:alert(1)</link><guid>post-x</guid></item>
</channel></rss>`

const atom = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Notes</title><id>urn:notes</id><updated>2026-02-03T10:00:00Z</updated>
<entry><title>Atom two</title><id>urn:notes:2</id><link href="https://notes.example/2"/><updated>2026-02-03T10:00:00Z</updated><summary>Two</summary></entry>
<entry><title>Atom one</title><id>urn:notes:1</id><link href="https://notes.example/1"/><published>2026-02-01T10:00:00Z</published><updated>2026-02-01T10:00:00Z</updated></entry>
</feed>`

func TestParseRSSAndAtom(t *testing.T) {
	base, _ := url.Parse("https://blog.example/feed.xml")
	got, err := Parse([]byte(rss), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("want 2 entries (the javascript: link left out), got %+v", got)
	}
	if got[0].ID != "post-1" || got[0].URL != "https://blog.example/1" || got[1].ID != "post-2" {
		t.Fatalf("oldest first, relative link resolved: %+v", got)
	}
	if got[1].Title != "Second & newest" || got[1].Summary != "Hello world" || got[1].Published.IsZero() {
		t.Fatalf("text of the newest: %+v", got[1])
	}
	got, err = Parse([]byte(atom), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "urn:notes:1" || got[1].URL != "https://notes.example/2" || got[1].Summary != "Two" {
		t.Fatalf("atom: %+v", got)
	}
	if _, err := Parse([]byte("<html><body>not a feed</body></html>"), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("html: %v", err)
	}
}

// onLoopback lets the tests' own servers, which listen on loopback, be
// polled (NEWSLETTER_WEBHOOK_ALLOW_PRIVATE, as the webhook tests do).
var onLoopback = netguard.Guard{AllowPrivate: true}

// A feed on a public name may answer with a redirect into this machine or
// its network: the poll refuses to follow it, and the target is never
// asked. The test's server is itself on loopback, so the first hop goes
// through a client that allows it while the redirect is judged by the
// guard that refuses private addresses, as in production.
func TestRedirectIntoPrivateNetworkRefused(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write([]byte(rss))
	}))
	// 127.0.0.2 is loopback too, and not the address the server tests
	// usually think of. Linux answers on all of 127/8; where it does not,
	// 127.0.0.1 is the same case.
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		if err := target.Listener.Close(); err != nil {
			t.Fatal(err)
		}
		target.Listener = l
	}
	target.Start()
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/feed.xml", http.StatusFound)
	}))
	defer redirector.Close()

	refusing := netguard.Guard{}
	client := onLoopback.Client(netguard.Limits{Timeout: 10 * time.Second, FollowRedirects: MaxRedirects})
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return refusing.CheckRedirect(req.Context(), req.URL)
	}
	f := &Fetcher{Client: client}
	res, err := f.Fetch(context.Background(), redirector.URL+"/feed.xml", "", "")
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, netguard.ErrPrivate) {
		t.Fatalf("a redirect to 127.0.0.2: %+v, err %v; want unreachable, not public", res, err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was asked %d times", n)
	}

	// The guarded client a Fetcher builds itself refuses too, at the
	// first hop already (the dialer judges every connection).
	_, err = (&Fetcher{}).Fetch(context.Background(), redirector.URL+"/feed.xml", "", "")
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, netguard.ErrPrivate) {
		t.Fatalf("the default fetcher polled loopback: %v", err)
	}

	// With private addresses allowed (tests, development) the redirect is
	// followed and the feed read from its target.
	res, err = (&Fetcher{Guard: onLoopback}).Fetch(context.Background(), redirector.URL+"/feed.xml", "", "")
	if err != nil || len(res.Entries) != 2 || reached.Load() != 1 {
		t.Fatalf("with private allowed: %+v, err %v, target asked %d times", res, err, reached.Load())
	}
}

// feedServer serves body with an ETag and a Last-Modified, answering 304
// to either validator, and records the conditional headers it got.
type feedServer struct {
	mu      sync.Mutex
	body    string
	etag    string
	inm     []string
	ims     []string
	lastMod string
}

func (f *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inm, f.ims = append(f.inm, r.Header.Get("If-None-Match")), append(f.ims, r.Header.Get("If-Modified-Since"))
	w.Header().Set("ETag", f.etag)
	w.Header().Set("Last-Modified", f.lastMod)
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/rss+xml")
	_, _ = w.Write([]byte(f.body))
}

func TestConditionalGet(t *testing.T) {
	fs := &feedServer{body: rss, etag: `"v1"`, lastMod: "Tue, 03 Feb 2026 10:00:00 GMT"}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	f := &Fetcher{UserAgent: DefaultUserAgent, Guard: onLoopback}
	ctx := context.Background()
	first, err := f.Fetch(ctx, srv.URL, "", "")
	if err != nil || first.NotModified || len(first.Entries) != 2 || first.ETag != `"v1"` || first.LastModified != fs.lastMod {
		t.Fatalf("first: %+v %v", first, err)
	}
	second, err := f.Fetch(ctx, srv.URL, first.ETag, first.LastModified)
	if err != nil || !second.NotModified || len(second.Entries) != 0 || second.ETag != `"v1"` {
		t.Fatalf("second: %+v %v", second, err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.inm[0] != "" || fs.inm[1] != `"v1"` || fs.ims[1] != fs.lastMod {
		t.Fatalf("conditional headers sent: If-None-Match %q, If-Modified-Since %q", fs.inm, fs.ims)
	}
}

func TestRefusals(t *testing.T) {
	big := strings.Repeat("x", 4096)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.(http.Flusher).Flush() // chunked: no Content-Length to refuse early
		_, _ = w.Write([]byte(`<rss version="2.0"><channel><title>` + big + `</title></channel></rss>`))
	})
	mux.HandleFunc("/announced", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000")
		_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`<rss><channel><item>`)) })
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusGone) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := &Fetcher{MaxBytes: 1024, Guard: onLoopback}
	for path, want := range map[string]error{"/big": ErrTooLarge, "/announced": ErrTooLarge, "/broken": ErrInvalid, "/gone": ErrUnreachable} {
		if _, err := f.Fetch(context.Background(), srv.URL+path, "", ""); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
}

// TestTimeoutIsBounded: a server that never answers costs the poll its
// timeout, not forever; the handler is released when the test ends.
func TestTimeoutIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	f := &Fetcher{Timeout: 200 * time.Millisecond, Guard: onLoopback}
	done := make(chan error, 1)
	go func() {
		_, err := f.Fetch(context.Background(), srv.URL, "", "")
		done <- err
	}()
	// The bound is the fetcher's own deadline; the test's wait is only a
	// backstop far above it, so a busy machine cannot fail it.
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want unreachable by the deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the fetch outlived its timeout")
	}
}
