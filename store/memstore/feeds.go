package memstore

import (
	"context"
	"time"

	"github.com/newsletter/newsletter/store"
)

// memFeed is one feed's state. It does not expire (a test's store lives
// shorter than store.FeedStateTTL).
type memFeed struct {
	state store.FeedState
	seen  map[string]time.Time
}

func (m *Memory) feed(topic, url string) *memFeed {
	k := [2]string{topic, url}
	f, ok := m.feeds[k]
	if !ok {
		f = &memFeed{state: store.FeedState{Registered: m.now().UTC().Truncate(time.Millisecond)}, seen: map[string]time.Time{}}
		m.feeds[k] = f
	}
	return f
}

// FeedState implements store.Feeds.
func (m *Memory) FeedState(_ context.Context, topic, url string) (store.FeedState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.feed(topic, url).state, nil
}

// SaveFeedPoll implements store.Feeds.
func (m *Memory) SaveFeedPoll(_ context.Context, topic, url, etag, lastModified string, entries []store.FeedEntry) (int, error) {
	if len(entries) > store.FeedMaxEntries {
		entries = entries[:store.FeedMaxEntries]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, now := m.feed(topic, url), m.now().UTC().Truncate(time.Millisecond)
	added := 0
	for _, e := range entries {
		_, old := f.seen[e.ID]
		f.seen[e.ID] = now
		if old || !(f.state.Baselined || e.Published.After(f.state.Registered)) {
			continue
		}
		m.items = append(m.items, store.Item{ID: int64(len(m.items) + 1), Title: e.Title, URL: e.URL, Summary: e.Summary, Topic: topic, PublishedAt: now})
		added++
	}
	f.state.ETag, f.state.LastModified, f.state.Baselined = etag, lastModified, true
	return added, nil
}
