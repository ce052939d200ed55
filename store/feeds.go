package store

import (
	"context"
	"time"
)

// FeedEntry is one entry of a polled RSS or Atom feed.
type FeedEntry struct {
	// ID identifies the entry within its feed (RSS guid, Atom id, or its
	// link when the feed gives neither): an entry becomes an item once.
	ID string
	// Published is the entry's own date (zero when the feed gives none).
	Published time.Time
	Title     string
	URL       string
	Summary   string
}

// FeedState is what the polls of one feed of one topic left behind.
type FeedState struct {
	// ETag and LastModified are the validators of the last answer, sent
	// back as If-None-Match and If-Modified-Since.
	ETag         string
	LastModified string
	// Registered is when the poller first met the feed.
	Registered time.Time
	// Baselined: a poll has been saved. Before that, only entries
	// published after Registered become items, so a new feed does not
	// pour its whole history into the next digest.
	Baselined bool
}

// FeedSeenCap bounds the entry ids remembered per feed: the most recently
// seen are kept. A poll saves at most FeedMaxEntries entries, far fewer,
// so an entry still in the feed is never forgotten and never comes back.
const (
	FeedSeenCap    = 2000
	FeedMaxEntries = 500
)

// FeedStateTTL is how long a feed's state outlives its last poll: a feed
// taken out of the topics file for longer starts afresh (a new baseline).
const FeedStateTTL = 30 * 24 * time.Hour

// Feeds is the store's side of the feeds poller (RSS-to-email).
type Feeds interface {
	// FeedState returns the state of feed url of topic, registering the
	// feed now when it is new; each call keeps the state FeedStateTTL
	// longer.
	FeedState(ctx context.Context, topic, url string) (FeedState, error)
	// SaveFeedPoll records a poll's answer in one atomic step: each entry
	// not seen before becomes an item of topic (before the baseline, only
	// one published after the feed's registration), the entries are
	// remembered, and the validators are saved for the next conditional
	// GET. It answers how many items it added; saving the same answer
	// again adds none.
	SaveFeedPoll(ctx context.Context, topic, url, etag, lastModified string, entries []FeedEntry) (int, error)
}
