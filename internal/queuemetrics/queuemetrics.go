// Package queuemetrics exports how many tasks each queue holds in each
// state, as newsletter_queue_tasks{queue,state}. asynq's own gauge,
// asynq_queue_size, adds archived, completed and aggregating tasks to the
// waiting ones, so dead letters and welcome mails not yet due looked like
// a backlog and scaled workers up; here every state is its own series, and
// autoscaling reads pending and retry only.
//
// The numbers are read from Redis, so every process that exports them
// reports the same: dashboards and the KEDA query aggregate with max by
// (queue, state), never sum. Cache (cache.go) stands in front of this and
// every other collector that reads Redis: one reading every few seconds
// whatever the scrape rate, and a scrape that answers in time when Redis
// does not.
package queuemetrics

import (
	"errors"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
)

var desc = prometheus.NewDesc("newsletter_queue_tasks",
	"Tasks per queue and state: pending (waiting to run), scheduled (due later, such as a welcome in its window), "+
		"retry (failed, waiting for the next try), active (running), archived (failed for good: dead letters), "+
		"aggregating (events waiting to be bundled). Every exporter reports the same numbers: aggregate with max.",
	[]string{"queue", "state"}, nil)

var (
	lanePendingDesc = prometheus.NewDesc("newsletter_lane_pending",
		"Tasks waiting to run in a lane's queues (pending; not retry, scheduled or archived): what its workers have to do now. "+
			"Every exporter reports the same numbers: aggregate with max.",
		[]string{"lane"}, nil)
	laneAgeDesc = prometheus.NewDesc("newsletter_lane_oldest_pending_seconds",
		"Seconds the oldest pending task of a lane's queues has waited (0: none waiting). "+
			"Every exporter reports the same numbers: aggregate with max.",
		[]string{"lane"}, nil)
)

// States are the label values of state, in the order exported.
var States = []string{"pending", "scheduled", "retry", "active", "archived", "aggregating"}

// Inspector is what the collector needs of *asynq.Inspector.
type Inspector interface {
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// Collector is a prometheus.Collector over the given queues.
type Collector struct {
	Inspector Inspector
	Queues    []string
	// LaneOf names the lane of a queue (tasks.LaneOf); with it the
	// collector also exports each lane's pending tasks and the age of its
	// oldest (nil: none). A lane one of whose queues Redis did not answer
	// for is left out.
	LaneOf func(queue string) string
}

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- desc
	if c.LaneOf != nil {
		ch <- lanePendingDesc
		ch <- laneAgeDesc
	}
}

// lane adds up one lane's queues.
type lane struct {
	pending int
	oldest  float64
	unknown bool
}

// Collect implements prometheus.Collector. A queue no task has used yet
// reads as all zeros; a queue Redis did not answer for is left out, so a
// gap shows that the number is unknown, not that it is zero.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	lanes := map[string]*lane{}
	var order []string
	for _, q := range c.Queues {
		info, err := c.Inspector.GetQueueInfo(q)
		var l *lane
		if c.LaneOf != nil {
			name := c.LaneOf(q)
			if l = lanes[name]; l == nil {
				l = &lane{}
				lanes[name] = l
				order = append(order, name)
			}
		}
		if err != nil && !notFound(err) {
			if l != nil {
				l.unknown = true
			}
			continue
		}
		if l != nil && info != nil {
			l.pending += info.Pending
			if info.Pending > 0 {
				l.oldest = max(l.oldest, info.Latency.Seconds())
			}
		}
		counts := map[string]int{}
		if info != nil {
			counts = map[string]int{"pending": info.Pending, "scheduled": info.Scheduled, "retry": info.Retry,
				"active": info.Active, "archived": info.Archived, "aggregating": info.Aggregating}
		}
		for _, st := range States {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(counts[st]), q, st)
		}
	}
	for _, name := range order {
		if l := lanes[name]; !l.unknown && name != "" {
			ch <- prometheus.MustNewConstMetric(lanePendingDesc, prometheus.GaugeValue, float64(l.pending), name)
			ch <- prometheus.MustNewConstMetric(laneAgeDesc, prometheus.GaugeValue, l.oldest, name)
		}
	}
}

// notFound: asynq v0.26 reports a queue nobody used yet with an internal
// NOT_FOUND error rather than ErrQueueNotFound.
func notFound(err error) bool {
	return errors.Is(err, asynq.ErrQueueNotFound) || strings.Contains(err.Error(), "NOT_FOUND")
}
