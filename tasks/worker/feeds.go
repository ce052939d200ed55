package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/newsletter/newsletter/internal/feeds"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Feed poll results, the result label of newsletter_feed_polls_total.
const (
	FeedNew         = "new"          // new entries became items
	FeedUnchanged   = "unchanged"    // an answer with nothing new
	FeedNotModified = "not_modified" // 304 to the validators
	FeedUnreachable = "unreachable"  // no answer, an error status or a timeout
	FeedTooLarge    = "too_large"    // over the size cap
	FeedInvalid     = "invalid"      // not RSS or Atom
	FeedStoreError  = "store_error"  // the answer could not be saved (Redis); the next poll fetches it again
)

// FeedResults are the values of the result label.
var FeedResults = []string{FeedNew, FeedUnchanged, FeedNotModified, FeedUnreachable, FeedTooLarge, FeedInvalid, FeedStoreError}

// FeedPoller runs feeds:poll: each feed of the topics file, fetched with
// the validators of its last answer, its new entries saved as items of
// its topic. A feed that fails is logged (its URL, which is the
// operator's, never a reader's data) and counted, and the others go on:
// no feed can fail the task. Only a store failure does, so asynq retries
// the poll; what was saved stays saved (each save is atomic and saving an
// answer again adds nothing).
type FeedPoller struct {
	Store   store.Feeds
	Topics  *topics.Set
	Fetcher *feeds.Fetcher
	Metrics *Metrics
	Log     *slog.Logger
	// Parallel is how many feeds are fetched at once (default 4).
	Parallel int
}

// HandleFeedsPoll handles TypeFeedsPoll.
func (p *FeedPoller) HandleFeedsPoll(ctx context.Context, pl tasks.FeedsPollPayload) error {
	return p.PollAll(ctx)
}

// PollAll polls every feed once.
func (p *FeedPoller) PollAll(ctx context.Context) error {
	if p.Topics == nil {
		return nil
	}
	list := p.Topics.Feeds()
	parallel := p.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, parallel)
	)
	for _, f := range list {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.Poll(ctx, f); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Poll polls one feed. It answers an error only when the store failed.
func (p *FeedPoller) Poll(ctx context.Context, f topics.Feed) error {
	log := p.Log.With("topic", f.Topic, "feed", f.URL)
	st, err := p.Store.FeedState(ctx, f.Topic, f.URL)
	if err != nil {
		p.count(FeedStoreError, 0)
		return fmt.Errorf("feed %s: %w", f.URL, err)
	}
	res, err := p.Fetcher.Fetch(ctx, f.URL, st.ETag, st.LastModified)
	switch {
	case errors.Is(err, feeds.ErrTooLarge):
		log.Warn("feed poll: too large, skipped", "err", err)
		p.count(FeedTooLarge, 0)
		return nil
	case errors.Is(err, feeds.ErrInvalid):
		log.Warn("feed poll: not a feed, skipped", "err", err)
		p.count(FeedInvalid, 0)
		return nil
	case err != nil:
		log.Warn("feed poll: unreachable, tried again next time", "err", err)
		p.count(FeedUnreachable, 0)
		return nil
	case res.NotModified:
		p.count(FeedNotModified, 0)
		return nil
	}
	n, err := p.Store.SaveFeedPoll(ctx, f.Topic, f.URL, res.ETag, res.LastModified, res.Entries)
	if err != nil {
		p.count(FeedStoreError, 0)
		return fmt.Errorf("feed %s: %w", f.URL, err)
	}
	if n == 0 {
		p.count(FeedUnchanged, 0)
		if !st.Baselined {
			log.Info("feed poll: first look; the entries published before the feed was added are not items", "entries", len(res.Entries))
		}
		return nil
	}
	log.Info("feed poll: new items", "items", n)
	p.count(FeedNew, n)
	return nil
}

func (p *FeedPoller) count(result string, items int) {
	p.Metrics.FeedPolls.WithLabelValues(result).Inc()
	p.Metrics.FeedItems.Add(float64(items))
}
