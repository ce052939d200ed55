package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/nettest"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/feeds"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// blog is an RSS 2.0 feed whose entries the test adds; it answers 304 to
// its current ETag and records the If-None-Match it got.
type blog struct {
	mu      sync.Mutex
	entries []string // guids, oldest first
	inm     []string
}

func (b *blog) add(guid string) { b.mu.Lock(); b.entries = append(b.entries, guid); b.mu.Unlock() }

func (b *blog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inm = append(b.inm, r.Header.Get("If-None-Match"))
	etag := fmt.Sprintf(`"%d"`, len(b.entries))
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var items strings.Builder
	for i := len(b.entries) - 1; i >= 0; i-- { // newest first, as feeds do
		g := b.entries[i]
		// Undated: after the first poll an entry is new by its id alone.
		fmt.Fprintf(&items, "<item><title>%s</title><link>https://blog.example/%s</link><guid>%s</guid></item>", g, g, g)
	}
	fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Blog</title>%s</channel></rss>`, items.String())
}

const notesAtom = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Notes</title><id>urn:notes</id><updated>2026-02-03T10:00:00Z</updated>
<entry><title>Old note</title><id>urn:notes:old</id><link href="https://notes.example/old"/><updated>2020-01-01T00:00:00Z</updated></entry>
<entry><title>Future note</title><id>urn:notes:future</id><link href="https://notes.example/future"/><updated>2999-01-01T00:00:00Z</updated></entry>
</feed>`

func titles(t *testing.T, s store.Digests, topic string) []string {
	t.Helper()
	items, err := s.ItemsAfter(context.Background(), topic, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Title)
	}
	return out
}

// TestFeedsBecomeItemsOnce: across polls and a restart each new entry is
// one item of its topic; the first poll takes only what is newer than the
// feed's registration; a 304 is respected; bad feeds are counted, change
// nothing and do not fail the poll.
func TestFeedsBecomeItemsOnce(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBWorker)
	ctx := context.Background()
	b := &blog{}
	b.add("a")
	b.add("b")
	mux := http.NewServeMux()
	mux.Handle("/blog.xml", b)
	mux.HandleFunc("/notes.atom", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(notesAtom)) })
	mux.HandleFunc("/huge.xml", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`<rss version="2.0"><channel><title>` + strings.Repeat("x", 64<<10) + `</title></channel></rss>`))
	})
	mux.HandleFunc("/broken.xml", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<rss><channel><item>")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	deadURL := "http://" + nettest.RefusedAddr(t) + "/gone.xml" // nothing listens there

	set, err := topics.Parse([]byte(fmt.Sprintf(`topics:
- {id: digest, name: D, feeds: [%s/notes.atom]}
- {id: updates, name: U}
- {id: research, name: R, feeds: [%s/blog.xml, %s/huge.xml, %s/broken.xml, %s]}
`, srv.URL, srv.URL, srv.URL, srv.URL, deadURL)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	metrics := NewMetrics(nil)
	newPoller := func() *FeedPoller { // a worker process: its own store and fetcher on the shared Redis
		return NewHandlers(Deps{Store: store.NewRedis(rdb), Links: Links{Topics: set}, Feeds: &feeds.Fetcher{MaxBytes: 32 << 10, Timeout: 10 * time.Second, Guard: netguard.Guard{AllowPrivate: true}}, Metrics: metrics, Log: discard}).Feeds
	}
	polls := func(result string) int { return int(testutil.ToFloat64(metrics.FeedPolls.WithLabelValues(result))) }
	p := newPoller()

	// The first poll, through the task: the blog's history is not news;
	// the Atom entry dated after registration is. Bad feeds: counted.
	if err := runTask(ctx, tasks.FeedsPoll, p.HandleFeedsPoll, tasks.NewFeedsPoll(tasks.FeedsSlot(time.Now(), time.Minute), time.Minute)); err != nil {
		t.Fatalf("a poll with bad feeds failed: %v", err)
	}
	if got := titles(t, p.Store.(store.Digests), "research"); len(got) != 0 {
		t.Fatalf("the first poll made the blog's history items: %v", got)
	}
	if got := titles(t, p.Store.(store.Digests), "digest"); len(got) != 1 || got[0] != "Future note" {
		t.Fatalf("atom items %v, want only the entry dated after the feed was added", got)
	}
	if polls(FeedTooLarge) != 1 || polls(FeedInvalid) != 1 || polls(FeedUnreachable) != 1 || polls(FeedNew) != 1 || polls(FeedUnchanged) != 1 {
		t.Fatalf("counts: too_large %d invalid %d unreachable %d new %d unchanged %d",
			polls(FeedTooLarge), polls(FeedInvalid), polls(FeedUnreachable), polls(FeedNew), polls(FeedUnchanged))
	}
	for _, bad := range []string{srv.URL + "/huge.xml", srv.URL + "/broken.xml", deadURL} {
		if st, _ := p.Store.FeedState(ctx, "research", bad); st.Baselined || st.ETag != "" {
			t.Fatalf("a bad feed left state: %+v", st)
		}
	}

	// Nothing new: the blog answers 304 to the ETag the first poll saved.
	if err := p.Poll(ctx, topics.Feed{Topic: "research", URL: srv.URL + "/blog.xml"}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	sent := b.inm[len(b.inm)-1]
	b.mu.Unlock()
	if sent != `"2"` || polls(FeedNotModified) != 1 {
		t.Fatalf("If-None-Match %q, not_modified %d", sent, polls(FeedNotModified))
	}

	// A new post: one item, and one only however often it is polled.
	b.add("c")
	for range 2 {
		if err := p.PollAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := titles(t, p.Store.(store.Digests), "research"); strings.Join(got, ",") != "c" {
		t.Fatalf("research items %v, want [c]", got)
	}

	// A restart: a new process, same Redis. The seen entries stay seen
	// even when the feed answers in full (its ETag changed).
	b.add("d")
	p2 := newPoller()
	if err := p2.PollAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := titles(t, p2.Store.(store.Digests), "research"); strings.Join(got, ",") != "c,d" {
		t.Fatalf("research items after a restart %v, want [c d]", got)
	}
	if got := titles(t, p2.Store.(store.Digests), "digest"); len(got) != 1 {
		t.Fatalf("the atom feed's entry came back: %v", got)
	}
	if n := testutil.ToFloat64(metrics.FeedItems); n != 3 {
		t.Fatalf("newsletter_feed_items_total %v, want 3", n)
	}

	// Feed items of the digest topic are the weekly digest's; research's are not.
	run, _, err := store.NewRedis(rdb).StartDigestRun(ctx, "2030-W10")
	if err != nil || len(run.Items) != 1 || run.Items[0].Title != "Future note" {
		t.Fatalf("digest run items %+v %v", run.Items, err)
	}
}

// TestFeedsPollOncePerSlot: two schedulers firing in the same slot meet
// on one TaskID; the next slot is a new poll.
func TestFeedsPollOncePerSlot(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 7, 0, 0, time.UTC)
	slot, dup, err := tasks.EnqueueFeedsPoll(ctx, d.client, now, 15*time.Minute)
	if err != nil || dup || !slot.Equal(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("first: %v %v %v", slot, dup, err)
	}
	if _, dup, err := tasks.EnqueueFeedsPoll(ctx, d.client, now.Add(7*time.Minute), 15*time.Minute); err != nil || !dup {
		t.Fatalf("a second scheduler in the same slot: dup=%v %v", dup, err)
	}
	if _, dup, err := tasks.EnqueueFeedsPoll(ctx, d.client, now.Add(8*time.Minute), 15*time.Minute); err != nil || dup {
		t.Fatalf("the next slot: dup=%v %v", dup, err)
	}
}
