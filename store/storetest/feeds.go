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
