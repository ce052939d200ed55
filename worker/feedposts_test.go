package worker

import (
	"sync/atomic"

	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/settings"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/feeds"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// postsBlog is an RSS 2.0 feed whose posts the test adds, each with an
// HTML description; it answers 304 to its current ETag.
type postsBlog struct {
	mu    sync.Mutex
	posts []string // guids, oldest first
	edits int      // the feed changed without a new post (its ETag with it)
	full  int      // answers in full (not 304)
}

func (b *postsBlog) add(guids ...string) {
	b.mu.Lock()
	b.posts = append(b.posts, guids...)
	b.mu.Unlock()
}
func (b *postsBlog) edit()        { b.mu.Lock(); b.edits++; b.mu.Unlock() }
func (b *postsBlog) answers() int { b.mu.Lock(); defer b.mu.Unlock(); return b.full }

func (b *postsBlog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	etag := fmt.Sprintf(`"%d-%d"`, len(b.posts), b.edits)
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b.full++
	var items strings.Builder
	for i := len(b.posts) - 1; i >= 0; i-- {
		g := b.posts[i]
		fmt.Fprintf(&items, `<item><title>Post %s</title><link>https://blog.example/%s</link><guid>%s</guid>`+
			`<description>&lt;p&gt;About &lt;b&gt;%s&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/p&gt;</description></item>`, g, g, g, g)
	}
	fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Blog</title>%s</channel></rss>`, items.String())
}

// feedPosts is a test's feed in mode each, its readers and its worker.
type feedPosts struct {
	d       *delivery
	blog    *postsBlog
	set     *topics.Set
	feed    topics.Feed
	readers []string
	metrics *Metrics

	mu    sync.Mutex
	clock time.Time
}

func (e *feedPosts) now() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.clock }

// nextDay moves the pollers' clock a day on; the clock stays in the
// past, so the plans it dates are due at once.
func (e *feedPosts) nextDay() { e.mu.Lock(); e.clock = e.clock.Add(24 * time.Hour); e.mu.Unlock() }

// poller is one worker process's poller on the shared Redis: a restart is
// a new one.
func (e *feedPosts) poller(t *testing.T) *FeedPoller {
	t.Helper()
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	return NewHandlers(Deps{Store: store.NewRedis(e.d.rdb), Links: Links{Topics: e.set}, Render: render, Queue: e.d.client, Now: e.now,
		Feeds:   &feeds.Fetcher{Timeout: 10 * time.Second, Guard: netguard.Guard{AllowPrivate: true}},
		Metrics: e.metrics, Log: discard}).Feeds
}

func (e *feedPosts) pollTask(t *testing.T, p *FeedPoller) {
	t.Helper()
	if err := runTask(context.Background(), tasks.FeedsPoll, p.HandleFeedsPoll, tasks.NewFeedsPoll(tasks.FeedsSlot(e.now(), time.Minute), time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// issues are every issue, oldest first.
func (e *feedPosts) issues(t *testing.T) []store.Issue {
	t.Helper()
	list, err := e.d.store.ListIssues(context.Background(), "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(list)
	return list
}

// mails counts the mails by reader and subject.
func (e *feedPosts) mails() map[string]int {
	got := map[string]int{}
	for _, m := range e.d.smtp.Messages() {
		for _, to := range m.To {
			got[strings.ToLower(to)+" "+m.Header.Get("Subject")]++
		}
	}
	return got
}

// waitSent waits for the posts' issues to be sent, then checks that each
// reader got each of them once and that nobody got anything else.
func (e *feedPosts) waitSent(t *testing.T, subjects ...string) {
	t.Helper()
	for _, is := range e.issues(t) {
		if slices.Contains(subjects, is.Subject) {
			e.d.waitIssueSent(t, is.ID)
		}
	}
	want := len(e.readers) * len(subjects)
	poll.Until(t, poll.BusyMachine, func() error {
		if n := len(e.d.smtp.Messages()); n != want {
			return fmt.Errorf("%d mails, want %d", n, want)
		}
		return nil
	})
	got := e.mails()
	for _, r := range e.readers {
		for _, s := range subjects {
			if n := got[r+" "+s]; n != 1 {
				t.Fatalf("%s got %q %d times, want once (all: %v)", r, s, n, got)
			}
		}
	}
}

// statuses are the issues' subjects and statuses, oldest first.
func (e *feedPosts) statuses(t *testing.T) string {
	t.Helper()
	var out []string
	for _, is := range e.issues(t) {
		out = append(out, is.Subject+":"+is.Status)
	}
	return strings.Join(out, ",")
}

func newFeedPosts(t *testing.T, maxPerDay int) *feedPosts {
	t.Helper()
	e := &feedPosts{d: newDelivery(t), blog: &postsBlog{}, metrics: NewMetrics(nil),
		clock: time.Now().UTC().Truncate(24 * time.Hour).Add(-10*24*time.Hour + 12*time.Hour)}
	mux := http.NewServeMux()
	mux.Handle("/blog.xml", e.blog)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	set, err := topics.Parse(fmt.Appendf(nil, `topics:
- {id: digest, name: D}
- {id: updates, name: U, feeds: [{url: %s/blog.xml, mode: each, max_per_day: %d}]}
`, srv.URL, maxPerDay), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.set, e.feed = set, set.Feeds()[0]
	e.readers = seed(t, e.d.store, "r", 3, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })
	seed(t, e.d.store, "d", 2, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Digest} }) // not the topic's: never mailed
	e.d.startWorker(t, 100000, 4)
	return e
}

// TestFeedPostsEachOnce: a feed in mode each sends every new entry as an
// issue of its own to the topic's readers, once: not the backlog found at
// the first poll, nothing again when polled again or by a restarted
// worker, at most max_per_day a day (the rest the next day), and an
// entry whose poll was killed before the send is sent by the next.
func TestFeedPostsEachOnce(t *testing.T) {
	e := newFeedPosts(t, 2)
	ctx := context.Background()
	e.blog.add("old1", "old2")

	// The first poll takes the backlog as seen.
	p := e.poller(t)
	e.pollTask(t, p)
	if got := e.issues(t); len(got) != 0 {
		t.Fatalf("the first poll made the backlog issues: %+v", got)
	}

	// Two new posts: two issues, sent to the topic's readers.
	e.blog.add("a", "b")
	e.pollTask(t, p)
	e.waitSent(t, "Post a", "Post b")
	if got := e.statuses(t); got != "Post a:sent,Post b:sent" {
		t.Fatalf("issues %s", got)
	}
	is := e.issues(t)[0]
	if is.Topics[0] != topics.Updates || !strings.Contains(is.Body, "About a") || !strings.Contains(is.Body, "(<https://blog.example/a>)") || strings.Contains(is.Body, "<script") {
		t.Fatalf("the post's issue: %+v", is)
	}
	html := e.d.smtp.Messages()[0].HTML()
	if !strings.Contains(html, `href="https://blog.example/`) || strings.Contains(html, "<script") || strings.Contains(html, "alert(1)") {
		t.Fatalf("the mail's HTML:\n%s", html)
	}

	// Polled again (a 304), and by a restarted worker after the feed
	// changed without a new post (answered in full): nothing new.
	e.pollTask(t, p)
	full := e.blog.answers()
	e.blog.edit()
	e.pollTask(t, e.poller(t))
	if got := e.statuses(t); got != "Post a:sent,Post b:sent" || e.blog.answers() != full+1 {
		t.Fatalf("polled again: issues %s; the feed answered in full %d times, want %d", got, e.blog.answers(), full+1)
	}

	// A third post on the same day: made, but the day's cap (2) is
	// spent: it waits, a draft, and no mail goes.
	e.blog.add("c")
	e.pollTask(t, e.poller(t))
	if got := e.statuses(t); got != "Post a:sent,Post b:sent,Post c:draft" {
		t.Fatalf("over the cap: issues %s", got)
	}
	if n := len(e.d.smtp.Messages()); n != 6 {
		t.Fatalf("%d mails over the cap, want 6", n)
	}

	// The next day a restarted worker sends it. A fourth post is claimed
	// by a poll killed before its send (the fetch alone): the next poll
	// sends it, within the day's cap.
	e.nextDay()
	e.pollTask(t, e.poller(t))
	e.waitSent(t, "Post a", "Post b", "Post c")
	e.blog.add("d")
	if err := e.poller(t).fetch(ctx, e.feed); err != nil {
		t.Fatal(err)
	}
	if got := e.statuses(t); got != "Post a:sent,Post b:sent,Post c:sent,Post d:draft" {
		t.Fatalf("killed before the send: issues %s", got)
	}
	e.pollTask(t, e.poller(t))
	e.waitSent(t, "Post a", "Post b", "Post c", "Post d")

	// A poll killed after its send, before it took the issue off the
	// feed's list: the next poll finds it sending and sends nothing more.
	e.nextDay()
	e.blog.add("e")
	p = e.poller(t)
	if err := p.fetch(ctx, e.feed); err != nil {
		t.Fatal(err)
	}
	rel, err := p.Store.ReleaseFeedPosts(ctx, e.feed.Topic, e.feed.URL, e.now().Format(time.DateOnly), e.feed.MaxPerDay)
	if err != nil || len(rel.Out) != 1 {
		t.Fatalf("release: %+v %v", rel, err)
	}
	draft, err := p.Store.Issue(ctx, rel.Out[0])
	if err != nil {
		t.Fatal(err)
	}
	svc := &issues.Service{Store: p.Store, Jobs: outboxDispatcher{queue: e.d.client, outbox: p.Store}, Log: discard, Now: e.now}
	if _, _, err := svc.Send(ctx, draft, issues.When{}, issues.SendOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	e.pollTask(t, e.poller(t))
	e.waitSent(t, "Post a", "Post b", "Post c", "Post d", "Post e")
	if rel, err := p.Store.ReleaseFeedPosts(ctx, e.feed.Topic, e.feed.URL, e.now().Format(time.DateOnly), e.feed.MaxPerDay); err != nil || len(rel.Out) != 0 {
		t.Fatalf("the sent post is still on the list: %+v %v", rel, err)
	}
	if got := e.statuses(t); got != "Post a:sent,Post b:sent,Post c:sent,Post d:sent,Post e:sent" {
		t.Fatalf("issues %s", got)
	}
	if n := testutil.ToFloat64(e.metrics.FeedIssues); n != 5 {
		t.Fatalf("newsletter_feed_issues_total %v, want 5", n)
	}
	// None of it became an item of the topic's digest.
	if items, err := e.d.store.ItemsAfter(ctx, topics.Updates, 0, 10); err != nil || len(items) != 0 {
		t.Fatalf("items %+v %v", items, err)
	}
}

// TestFeedPostQuietHours: a post is an issue like any other, so quiet
// hours hold it per reader: at 23:00 in Berlin the reader there gets it
// at 08:00 her time, the reader without a time zone at once.
func TestFeedPostQuietHours(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	blog := &postsBlog{}
	srv := httptest.NewServer(blog)
	defer srv.Close()
	set, err := topics.Parse(fmt.Appendf(nil, "topics:\n- {id: digest, name: D}\n- {id: updates, name: U, feeds: [{url: %s, mode: each}]}\n", srv.URL), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, d.store, "night", 1, func(r *store.SubscribeRequest) { r.Topics, r.Timezone = []string{topics.Updates}, "Europe/Berlin" })
	seed(t, d.store, "utc", 1, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })
	berlin, _ := time.LoadLocation("Europe/Berlin")
	night := time.Date(2099, 12, 7, 23, 0, 0, 0, berlin) // ahead of the real clock: what is held stays scheduled
	window, _ := quiet.Parse("22:00-08:00")
	render, _ := mailer.NewRenderer("")
	rec := &recorder{}
	links := newHandlersLinks()
	links.Topics = set
	h := NewHandlers(Deps{Store: d.store, Mailer: rec, Render: render, Log: discard, Queue: d.client, Quiet: quiet.New(&window),
		Links: links, Now: func() time.Time { return night },
		Feeds: &feeds.Fetcher{Timeout: 10 * time.Second, Guard: netguard.Guard{AllowPrivate: true}}})

	// The first poll sees the feed empty; then a post comes.
	if err := h.Feeds.PollAll(ctx); err != nil {
		t.Fatal(err)
	}
	blog.add("late")
	if err := h.Feeds.PollAll(ctx); err != nil {
		t.Fatal(err)
	}
	// The issue's plan, then its batches, as the worker would run them
	// (due at the test's clock, ahead of the real one: scheduled).
	run := func(typ string) {
		t.Helper()
		pending, err := d.insp.ListPendingTasks(tasks.QueueCritical)
		if err != nil {
			t.Fatal(err)
		}
		scheduled, err := d.insp.ListScheduledTasks(tasks.QueueCritical)
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		for _, ti := range append(pending, scheduled...) {
			if ti.Type != typ {
				continue
			}
			task := asynq.NewTask(ti.Type, ti.Payload)
			if typ == tasks.TypeIssuePlan {
				err = runTask(ctx, tasks.IssuePlan, h.Issues.HandleIssuePlan, task)
			} else {
				err = runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, task)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := d.insp.DeleteTask(tasks.QueueCritical, ti.ID); err != nil {
				t.Fatal(err)
			}
			ran++
		}
		if ran == 0 {
			t.Fatalf("no %s task", typ)
		}
	}
	run(tasks.TypeIssuePlan)
	run(tasks.TypeIssueEmail)
	if rec.count() != 1 || rec.sent[0].To != "utc0000@example.org" || rec.sent[0].Subject != "Post late" {
		t.Fatalf("at 23:00 Berlin: %d mails %+v", rec.count(), rec.sent)
	}
	held, err := d.insp.ListScheduledTasks(tasks.QueueCritical)
	if err != nil || len(held) != 1 || !held[0].NextProcessAt.Equal(time.Date(2099, 12, 8, 8, 0, 0, 0, berlin)) {
		t.Fatalf("held batches %+v %v, want one at 08:00 Berlin", held, err)
	}
}

// A post waits, as every bulk send does, while the postal address bulk
// mail must carry is not saved (NEWSLETTER_REQUIRE_POSTAL_ADDRESS): it
// stays a draft on the feed's list, and goes at the first poll after the
// address is saved.
func TestFeedPostWaitsForThePostalAddress(t *testing.T) {
	e := newFeedPosts(t, 3)
	e.blog.add("old")
	p := e.poller(t)
	e.pollTask(t, p)
	var ready atomic.Bool
	p.BulkReady = func(context.Context) error {
		if !ready.Load() {
			return settings.ErrNoPostalAddress
		}
		return nil
	}
	e.blog.add("held")
	e.pollTask(t, p)
	if got := e.statuses(t); got != "Post held:draft" {
		t.Fatalf("without a postal address: %s, want the post waiting as a draft", got)
	}
	if n := len(e.d.smtp.Messages()); n != 0 {
		t.Fatalf("%d mails went out without a postal address", n)
	}
	ready.Store(true)
	e.pollTask(t, p)
	e.waitSent(t, "Post held")
}
