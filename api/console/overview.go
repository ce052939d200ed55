package console

import (
	"context"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// chartDays is how many days the overview's chart spans.
const chartDays = 90

// runsShown is how many recent runs the overview lists.
const runsShown = 5

// overviewFresh is how long the overview's counts (by status and topic,
// the days, the growth) are kept: a count over every shard's bitmaps
// costs tens of milliseconds on the embedded Redis a fresh clone runs
// (its p99 was over 240 ms at 100,000 readers, BenchmarkOverview), and
// an overview opened again within seconds needs no new one. The page
// says when they were counted.
const overviewFresh = 5 * time.Second

// countsCache is the overview's last counts and when they were read.
type countsCache struct {
	mu     sync.Mutex
	at     time.Time
	stats  store.Stats
	growth []store.TopicGrowth
}

// overviewCounts are the counts, read again when older than
// overviewFresh (one reader at a time: others wait for its answer).
func (h *Handler) overviewCounts(ctx context.Context) (store.Stats, []store.TopicGrowth, time.Time, error) {
	c := &h.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	now := h.d.Now()
	if !c.at.IsZero() && now.Sub(c.at) < overviewFresh && !now.Before(c.at) {
		return c.stats, c.growth, c.at, nil
	}
	st, growth, err := h.d.People.StatsAndGrowth(ctx, chartDays)
	if err != nil {
		return st, growth, now, err
	}
	c.at, c.stats, c.growth = now, st, growth
	return st, growth, now, nil
}

type overviewData struct {
	// CountedAt is when the counts were read (they are kept
	// overviewFresh).
	CountedAt time.Time
	Stats     *store.Stats
	Statuses  []statusCount
	Topics    []topicCount
	Chart     template.HTML
	Growth    []topicGrowth
	Runs      []run
	Queues    []queueHealth
}

type statusCount struct {
	Status store.Status
	N      int64
}

// topicCount is how many have a topic on: Active the active ones (its
// next issue's audience), All with those pending too.
type topicCount struct {
	topics.Topic
	Active, All int64
}

// topicGrowth is one topic's new subscriptions over the chart's days by
// source: the totals and the chart.
type topicGrowth struct {
	topics.Topic
	Total store.GrowthDay
	Chart template.HTML
}

// run is one issue that went out, with its rates.
type run struct {
	Issue    store.Issue
	Progress store.IssueProgress
}

type queueHealth struct {
	Name                                        string
	Pending, Active, Scheduled, Retry, Archived int
	Latency                                     time.Duration
	Paused                                      bool
}

// overview is GET /admin/: who is on the list, how it moved over 90
// days, the last runs and the queues.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := overviewData{}
	if h.d.People != nil {
		st, growth, at, err := h.overviewCounts(ctx)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Stats, d.CountedAt = &st, at
		for _, s := range store.Statuses {
			d.Statuses = append(d.Statuses, statusCount{s, st.ByStatus[s]})
		}
		for _, t := range h.cfg.Topics.Current().Topics {
			tc := topicCount{Topic: t}
			for _, c := range st.ByTopic {
				if c.Topic == t.ID {
					tc.Active, tc.All = c.Active, c.Subscribers
				}
			}
			d.Topics = append(d.Topics, tc)
		}
		d.Chart = chart(st.Days)
		for _, t := range h.cfg.Topics.Current().Topics {
			if g, ok := store.TopicGrowthOf(growth, t.ID); ok {
				d.Growth = append(d.Growth, topicGrowth{Topic: t, Total: g.Total, Chart: growthChart(t.Name, g)})
			}
		}
	}
	issues, err := h.d.Store.ListIssues(ctx, "", 0, 4*runsShown)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	for _, is := range issues {
		if len(d.Runs) == runsShown {
			break
		}
		if is.Status == store.IssueDraft || is.Status == store.IssueScheduled {
			continue
		}
		p, err := h.d.Store.IssueProgress(ctx, is.ID)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Runs = append(d.Runs, run{Issue: is, Progress: p})
	}
	if h.d.Queues != nil {
		for _, q := range tasks.Queues {
			info, err := h.d.Queues.GetQueueInfo(q)
			if err != nil {
				// A queue nothing was ever put in does not exist yet.
				d.Queues = append(d.Queues, queueHealth{Name: q})
				continue
			}
			d.Queues = append(d.Queues, queueHealth{Name: q, Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
				Retry: info.Retry, Archived: info.Archived, Latency: info.Latency, Paused: info.Paused})
		}
	}
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Section: "overview", Data: d})
}
