package feeds

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
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
	f := &Fetcher{UserAgent: DefaultUserAgent}
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
	f := &Fetcher{MaxBytes: 1024}
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
	f := &Fetcher{Timeout: 200 * time.Millisecond}
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
