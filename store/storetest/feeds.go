package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// Feeds: a new feed is registered at its first look; its first saved poll
// takes only entries published after that; later polls take each new
// entry id once, whatever its date; a topic's items stay out of another
// topic's digest.
func testFeeds(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	const url = "https://blog.example/feed.xml"
	st, err := s.FeedState(ctx, "updates", url)
	must(t, err)
	if st.Registered.IsZero() || st.Baselined || st.ETag != "" || st.LastModified != "" {
		t.Fatalf("new feed: %+v", st)
	}
	reg := st.Registered
	old := store.FeedEntry{ID: "old", Published: reg.Add(-time.Hour), Title: "Old", URL: "https://blog.example/old"}
	undated := store.FeedEntry{ID: "undated", Title: "Undated", URL: "https://blog.example/undated"}
	fresh := store.FeedEntry{ID: "fresh", Published: reg.Add(time.Hour), Title: "Fresh", URL: "https://blog.example/fresh", Summary: "new"}
	n, err := s.SaveFeedPoll(ctx, "updates", url, `"v1"`, "Mon, 02 Jan 2026 15:04:05 GMT", []store.FeedEntry{old, undated, fresh})
	must(t, err)
	if n != 1 {
		t.Fatalf("first poll added %d items, want 1 (only the entry published after registration)", n)
	}
	if again, err := s.FeedState(ctx, "updates", url); err != nil || !again.Baselined || again.ETag != `"v1"` ||
		again.LastModified != "Mon, 02 Jan 2026 15:04:05 GMT" || !again.Registered.Equal(reg) {
		t.Fatalf("state after a poll: %+v %v (registered %v)", again, err, reg)
	}
	// The same answer again, then with one more undated entry: only that one is new.
	n, err = s.SaveFeedPoll(ctx, "updates", url, `"v1"`, "", []store.FeedEntry{old, undated, fresh})
	must(t, err)
	if n != 0 {
		t.Fatalf("the same entries again added %d items", n)
	}
	later := store.FeedEntry{ID: "later", Title: "Later", URL: "https://blog.example/later"}
	n, err = s.SaveFeedPoll(ctx, "updates", url, `"v2"`, "", []store.FeedEntry{later, old, undated, fresh})
	must(t, err)
	if n != 1 {
		t.Fatalf("a new undated entry after the baseline added %d items, want 1", n)
	}
	items, err := s.ItemsAfter(ctx, "updates", 0, 10)
	must(t, err)
	if len(items) != 2 || items[0].Title != "Fresh" || items[0].Summary != "new" || items[1].Title != "Later" || items[0].Topic != "updates" || items[0].PublishedAt.IsZero() {
		t.Fatalf("updates items: %+v", items)
	}
	if rest, _ := s.ItemsAfter(ctx, "updates", items[0].ID, 10); len(rest) != 1 || rest[0].ID != items[1].ID {
		t.Fatalf("items after %d: %+v", items[0].ID, rest)
	}
	// The same feed under the digest topic is a feed of its own, and its
	// items are the digest's; the updates items are not.
	dst, err := s.FeedState(ctx, "digest", url)
	must(t, err)
	if dst.Baselined {
		t.Fatal("the digest's copy of the feed shares the updates topic's state")
	}
	must2(t)(s.SaveFeedPoll(ctx, "digest", url, "", "", []store.FeedEntry{{ID: "d", Published: dst.Registered.Add(time.Minute), Title: "D", URL: "https://blog.example/d"}}))
	must2(t)(s.AddItem(ctx, store.Item{Title: "Posted", URL: "https://x.io/p"}))
	run, _, err := s.StartDigestRun(ctx, "2031-W01")
	must(t, err)
	if len(run.Items) != 2 || run.Items[0].Title != "D" || run.Items[1].Title != "Posted" || run.Items[1].Topic != "digest" {
		t.Fatalf("digest run items: %+v", run.Items)
	}
}

// FeedPosts (mode each): the first saved poll only marks the backlog
// seen; later, each new entry becomes one draft issue of its content,
// however often the same answer is saved; waiting issues are let out at
// most the cap a day, oldest first, and stay out until done; one a
// publisher moved meanwhile leaves uncounted.
func testFeedPosts(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	const url = "https://blog.example/posts.xml"
	post := func(id string) store.FeedPost {
		return store.FeedPost{EntryID: id, Content: store.IssueContent{Subject: "Post " + id, Body: "Body of " + id, Topics: []string{"updates"}}}
	}
	_, err := s.FeedState(ctx, "updates", url)
	must(t, err)
	n, err := s.SaveFeedPosts(ctx, "updates", url, `"v1"`, "", []store.FeedPost{post("a"), post("b")})
	must(t, err)
	if n != 0 {
		t.Fatalf("the first poll made %d issues of the backlog", n)
	}
	if st, err := s.FeedState(ctx, "updates", url); err != nil || !st.Baselined || st.ETag != `"v1"` || st.Registered.IsZero() {
		t.Fatalf("state after the first poll: %+v %v", st, err)
	}
	for i, want := range []int{3, 0} { // the same answer twice: made once
		n, err = s.SaveFeedPosts(ctx, "updates", url, `"v2"`, "", []store.FeedPost{post("a"), post("b"), post("c"), post("d"), post("e")})
		must(t, err)
		if n != want {
			t.Fatalf("save %d of three new entries made %d issues, want %d", i+1, n, want)
		}
	}
	drafts, err := s.ListIssues(ctx, store.IssueDraft, 0, 10)
	must(t, err)
	if len(drafts) != 3 || drafts[2].Subject != "Post c" || drafts[0].Subject != "Post e" || drafts[2].Slug != "post-c" || drafts[2].Topics[0] != "updates" || drafts[2].Body != "Body of c" {
		t.Fatalf("drafts: %+v", drafts)
	}
	c, d, e := drafts[2].ID, drafts[1].ID, drafts[0].ID

	// The cap is 2 on day 1: c and d go out, e waits.
	rel, err := s.ReleaseFeedPosts(ctx, "updates", url, "2026-03-02", 2)
	must(t, err)
	if len(rel.Out) != 2 || rel.Out[0] != c || rel.Out[1] != d || rel.Waiting != 1 {
		t.Fatalf("day 1: %+v, want out [%d %d], 1 waiting", rel, c, d)
	}
	// Asked again the same day (a retry, a restart): the same two, no more.
	rel, err = s.ReleaseFeedPosts(ctx, "updates", url, "2026-03-02", 2)
	must(t, err)
	if len(rel.Out) != 2 || rel.Waiting != 1 {
		t.Fatalf("day 1 again: %+v", rel)
	}
	must(t, s.FeedPostDone(ctx, "updates", url, c))
	must(t, s.FeedPostDone(ctx, "updates", url, d))
	if rel, err = s.ReleaseFeedPosts(ctx, "updates", url, "2026-03-02", 2); err != nil || len(rel.Out) != 0 || rel.Waiting != 1 {
		t.Fatalf("day 1 after both were done: %+v %v", rel, err)
	}
	// A publisher cancels e while it waits; a new entry f comes. Day 2
	// lets f out, counted; e leaves the list uncounted.
	is, err := s.Issue(ctx, e)
	must(t, err)
	must2(t)(s.TransitionIssue(ctx, e, []string{store.IssueDraft}, store.IssueCancelled, store.IssueChange{Round: is.Round}))
	n, err = s.SaveFeedPosts(ctx, "updates", url, `"v3"`, "", []store.FeedPost{post("f"), post("e")})
	must(t, err)
	if n != 1 {
		t.Fatalf("one new entry made %d issues", n)
	}
	rel, err = s.ReleaseFeedPosts(ctx, "updates", url, "2026-03-03", 1)
	must(t, err)
	if len(rel.Out) != 1 || rel.Out[0] == e || rel.Waiting != 0 {
		t.Fatalf("day 2: %+v (e, cancelled, is %d)", rel, e)
	}
	// The same feed in digest mode under another topic is a feed of its
	// own: none of these entries is seen there.
	if st, err := s.FeedState(ctx, "digest", url); err != nil || st.Baselined {
		t.Fatalf("the digest topic's copy: %+v %v", st, err)
	}
}
