package console

import (
	"html/template"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// chartDays is how many days the overview's chart spans.
const chartDays = 90

// runsShown is how many recent runs the overview lists.
const runsShown = 5

type overviewData struct {
	Stats    *store.Stats
	Statuses []statusCount
	Topics   []topicCount
	Chart    template.HTML
	Growth   []topicGrowth
	Runs     []run
	Queues   []queueHealth
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
		st, growth, err := h.d.People.StatsAndGrowth(ctx, chartDays)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Stats = &st
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
