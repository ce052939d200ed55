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

// FeedPost is an entry of a feed in mode each, made into the content of
// the issue it becomes if it is new (its slug made from the subject).
type FeedPost struct {
	EntryID string
	Content IssueContent
}

// FeedRelease is what a feed in mode each has to send: the issues let out
// (counted in their day's cap), which stay there until FeedPostDone.
type FeedRelease struct {
	Out []int64
	// Waiting is how many wait for a later day.
	Waiting int
}

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
	// SaveFeedPosts is SaveFeedPoll for a feed in mode each: each post
	// not seen before becomes a draft issue of its content, put in the
	// feed's waiting list in the same atomic step that marks its entry
	// seen, so a crash can neither lose an entry nor make it twice. Before
	// the feed's first saved poll every entry is only marked seen: a new
	// feed's backlog is not sent. It answers how many issues it made.
	SaveFeedPosts(ctx context.Context, topic, url, etag, lastModified string, posts []FeedPost) (int, error)
	// ReleaseFeedPosts lets waiting issues of the feed out, oldest first,
	// while fewer than maxPerDay were let out on day (its UTC date,
	// 2006-01-02); a waiting issue that is no longer a draft (a
	// publisher sent or cancelled it) leaves the list uncounted. It
	// answers every issue let out and not yet done, of any day.
	ReleaseFeedPosts(ctx context.Context, topic, url, day string, maxPerDay int) (FeedRelease, error)
	// FeedPostDone takes a let-out issue off the feed's list once it is
	// no longer a draft (sent, or moved by a publisher).
	FeedPostDone(ctx context.Context, topic, url string, issue int64) error
}
