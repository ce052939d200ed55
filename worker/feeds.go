package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/feeds"
	"github.com/newsletter/newsletter/services/issues"
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

// FeedStore is what the feeds poller needs of the store: the feeds'
// state, and the issues that the entries of feeds in mode each become
// (made, then sent through the issues' lifecycle).
type FeedStore interface {
	store.Feeds
	store.Issues
	tasks.OutboxCleaner
}

// FeedPoller runs feeds:poll: each feed of the topics file, fetched with
// the validators of its last answer, its new entries saved as items of
// its topic (mode digest) or each made an issue of its own and sent
// (mode each, sendPosts). A feed that fails is logged (its URL, which is
// the operator's, never a reader's data) and counted, and the others go
// on: no feed can fail the task. Only a store failure does, so asynq
// retries the poll; what was saved stays saved (each save is atomic and
// saving an answer again adds nothing).
type FeedPoller struct {
	Store   FeedStore
	Topics  topics.Source
	Fetcher *feeds.Fetcher
	// Render makes the issues of feeds in mode each (post.md); without
	// it such feeds are left alone, not polled. Queue takes their plans.
	Render  *mailer.Renderer
	Queue   tasks.Enqueuer
	Now     func() time.Time
	Metrics *Metrics
	Log     *slog.Logger
	// Parallel is how many feeds are fetched at once (default 4).
	Parallel int
	// BulkReady, when set, may refuse a post's send (no postal address
	// saved, NEWSLETTER_REQUIRE_POSTAL_ADDRESS): the post stays on the
	// feed's list and goes at a later poll, as every bulk send waits.
	BulkReady func(ctx context.Context) error
}

// HandleFeedsPoll handles TypeFeedsPoll.
func (p *FeedPoller) HandleFeedsPoll(ctx context.Context, pl tasks.FeedsPollPayload) error {
	return p.PollAll(ctx)
}

// PollAll polls every feed once.
func (p *FeedPoller) PollAll(ctx context.Context) error {
	if topics.Missing(p.Topics) {
		return nil
	}
	list := p.Topics.Current().Feeds()
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
// A feed in mode each then sends what its day's cap lets out, whether or
// not this poll found anything new: entries that waited for a new day,
// or issues a killed poll made and did not send.
func (p *FeedPoller) Poll(ctx context.Context, f topics.Feed) error {
	if f.Mode != topics.FeedEach {
		return p.fetch(ctx, f)
	}
	if p.Render == nil {
		// Claiming entries it cannot write would lose them: they stay
		// unseen for a worker that can.
		p.Log.Warn("feed poll: mode each needs the mail renderer, which this worker lacks; skipped", "topic", f.Topic, "feed", f.URL)
		return nil
	}
	return errors.Join(p.fetch(ctx, f), p.sendPosts(ctx, f))
}

// fetch fetches the feed and saves its answer: items, or draft issues.
func (p *FeedPoller) fetch(ctx context.Context, f topics.Feed) error {
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
	if f.Mode == topics.FeedEach {
		return p.savePosts(ctx, f, st, res, log)
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

// savePosts saves the answer of a feed in mode each: every entry is
// written as the issue it would be, and the store makes the new ones
// drafts on the feed's waiting list in the step that marks them seen.
func (p *FeedPoller) savePosts(ctx context.Context, f topics.Feed, st store.FeedState, res feeds.Result, log *slog.Logger) error {
	posts := make([]store.FeedPost, 0, len(res.Entries))
	for _, e := range res.Entries {
		c, err := p.postContent(f, e)
		if err != nil {
			// Left unclaimed: a fixed post.md takes it on a later poll.
			log.Warn("feed poll: an entry could not be made an issue; left for a later poll", "entry", e.ID, "err", err)
			continue
		}
		posts = append(posts, store.FeedPost{EntryID: e.ID, Content: c})
	}
	n, err := p.Store.SaveFeedPosts(ctx, f.Topic, f.URL, res.ETag, res.LastModified, posts)
	if err != nil {
		p.count(FeedStoreError, 0)
		return fmt.Errorf("feed %s: %w", f.URL, err)
	}
	if n == 0 {
		p.count(FeedUnchanged, 0)
		if !st.Baselined {
			log.Info("feed poll: first look; the entries already in the feed are taken as seen, none is sent", "entries", len(res.Entries))
		}
		return nil
	}
	log.Info("feed poll: new entries made issues", "issues", n)
	p.Metrics.FeedPolls.WithLabelValues(FeedNew).Inc()
	p.Metrics.FeedIssues.Add(float64(n))
	return nil
}

// postContent is the issue entry e of feed f becomes: post.md's subject
// and body, to f's topic, checked as a publisher's issue is. A body the
// check refuses (a summary too complex to render) falls back to the
// link alone.
func (p *FeedPoller) postContent(f topics.Feed, e store.FeedEntry) (store.IssueContent, error) {
	entry := mailer.Entry{Title: e.Title, URL: e.URL, Summary: e.Summary}
	for {
		subject, body, err := p.Render.PostIssue(entry)
		if err != nil {
			return store.IssueContent{}, err
		}
		c := store.IssueContent{Subject: subject, Body: body, Topics: []string{f.Topic}}
		err = issues.CheckContent(p.Topics.Current(), c)
		if err == nil || entry.Summary == "" {
			return c, err
		}
		entry.Summary = ""
	}
}

// sendPosts sends the issues of feed f (mode each) that its day's cap
// lets out, each through the issues' lifecycle as a publisher's send
// now: a transition from draft that only one caller wins, written with
// its plan's outbox entry, so a poll run twice, or killed after the
// send, sends nothing twice; an issue stays on the feed's list until it
// is no longer a draft, so one killed before its send is sent by the
// next poll. Quiet hours hold each reader's mail as for any issue. An
// issue a publisher moved meanwhile (sent, cancelled) is left as it is.
func (p *FeedPoller) sendPosts(ctx context.Context, f topics.Feed) error {
	log := p.Log.With("topic", f.Topic, "feed", f.URL)
	now := p.now()
	rel, err := p.Store.ReleaseFeedPosts(ctx, f.Topic, f.URL, now.UTC().Format(time.DateOnly), f.MaxPerDay)
	if err != nil {
		return fmt.Errorf("feed %s: %w", f.URL, err)
	}
	if rel.Waiting > 0 {
		log.Info("feed poll: entries wait for the next day's room", "waiting", rel.Waiting, "max_per_day", f.MaxPerDay)
	}
	if p.BulkReady != nil && len(rel.Out) > 0 {
		if err := p.BulkReady(ctx); err != nil {
			// Not the feed's fault: its posts wait on its list, and go
			// at the first poll that may send bulk mail.
			log.Warn("feed poll: posts wait until bulk mail may go", "posts", len(rel.Out), "why", err)
			return nil
		}
	}
	svc := issues.New(issues.Parts{Store: p.Store, Jobs: outboxDispatcher{queue: p.Queue, outbox: p.Store}, Log: p.Log, Now: p.now, BulkReady: p.BulkReady})
	var errs []error
	for _, id := range rel.Out {
		is, err := p.Store.Issue(ctx, id)
		switch {
		case errors.Is(err, store.ErrNoIssue):
			log.Warn("feed poll: a post's issue is gone; taken off the list", "issue", id)
		case err != nil:
			errs = append(errs, err)
			continue
		case is.Status == store.IssueDraft:
			// Force: the topic may have no readers yet; the post is
			// still the topic's, in its archive.
			sent, n, err := svc.Send(ctx, is, issues.When{}, issues.SendOptions{Force: true})
			switch {
			case err == nil:
				log.Info("feed poll: post sent as an issue", "issue", id, "slug", sent.Slug, "readers", n)
			case errors.Is(err, store.ErrIssueState):
				// Moved since it was read: by a publisher, or by a
				// poll that sent it and lost the answer.
			default:
				errs = append(errs, fmt.Errorf("feed %s: send issue %d: %w", f.URL, id, err))
				continue
			}
		}
		if err := p.Store.FeedPostDone(ctx, f.Topic, f.URL, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *FeedPoller) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// outboxDispatcher is issues.Dispatcher for the worker: the plan is
// queued and its outbox entry cleared (tasks.Dispatch); when the queue
// fails the entry stays and the relay queues it.
type outboxDispatcher struct {
	queue  tasks.Enqueuer
	outbox tasks.OutboxCleaner
}

func (d outboxDispatcher) Dispatch(ctx context.Context, j tasks.Job) (bool, error) {
	if d.queue == nil {
		return false, errors.New("this worker has no queue; the relay queues the plan")
	}
	return tasks.Dispatch(ctx, d.queue, d.outbox, j)
}

func (p *FeedPoller) count(result string, items int) {
	p.Metrics.FeedPolls.WithLabelValues(result).Inc()
	p.Metrics.FeedItems.Add(float64(items))
}
