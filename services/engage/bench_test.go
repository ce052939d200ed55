package engage_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/engage"
)

// BenchmarkRedirect is the handler's own cost per click (no network),
// its buffer written to the test's Redis: make bench-redirect measures
// it served.
func BenchmarkRedirect(b *testing.B) {
	r := newRig(b, engage.Aggregate, false, engage.RecorderConfig{FlushEvery: -1})
	paths := make([]string, 1024)
	for i := range paths {
		paths[i] = "/r/" + engage.Token(r.keys.LinkPart(engage.Link, issue, i%2), r.keys.ReaderPart(issue, int64(i+1), r.sent))
	}
	mux := http.NewServeMux()
	r.h.Register(mux)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest("GET", paths[i%len(paths)], nil)
		req.Header.Set("User-Agent", browser)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code != http.StatusFound {
			b.Fatal(w.Code)
		}
		if i%10000 == 0 {
			if err := r.h.Recorder.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReaderPart is the token part signed once per mail of an issue
// (issue #48: the keyed hash reused, not made anew per token).
func BenchmarkReaderPart(b *testing.B) {
	k := engage.NewKeys([]byte("a-secret-of-the-service-0123456789"))
	sent := time.Unix(1_800_000_000, 0)
	var n int64
	for b.Loop() {
		n++
		_ = k.ReaderPart(7, n, sent)
	}
}
