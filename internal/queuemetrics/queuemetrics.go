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
}

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) { ch <- desc }

// Collect implements prometheus.Collector. A queue no task has used yet
// reads as all zeros; a queue Redis did not answer for is left out, so a
// gap shows that the number is unknown, not that it is zero.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.Queues {
		info, err := c.Inspector.GetQueueInfo(q)
		if err != nil && !notFound(err) {
			continue
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
}

// notFound: asynq v0.26 reports a queue nobody used yet with an internal
// NOT_FOUND error rather than ErrQueueNotFound.
func notFound(err error) bool {
	return errors.Is(err, asynq.ErrQueueNotFound) || strings.Contains(err.Error(), "NOT_FOUND")
}
