package queuemetrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// queues answers GetQueueInfo from a table; a queue not in it was never
// used, and one in broken did not answer.
type queues struct {
	info   map[string]*asynq.QueueInfo
	broken map[string]bool
}

func (q queues) GetQueueInfo(name string) (*asynq.QueueInfo, error) {
	if q.broken[name] {
		return nil, errors.New("i/o timeout")
	}
	if i, ok := q.info[name]; ok {
		return i, nil
	}
	return nil, asynq.ErrQueueNotFound
}

// TestLaneFigures: a lane's pending tasks add up over its queues, its age
// is the oldest pending task's of any of them (a queue with nothing
// pending has no age), and a lane with a queue Redis did not answer for is
// a gap, not a number too low.
func TestLaneFigures(t *testing.T) {
	lanes := map[string]string{"transactional": "email", "critical": "email", "low": "email", "push": "push", "webhook": "webhook"}
	insp := queues{
		info: map[string]*asynq.QueueInfo{
			"transactional": {Pending: 2, Latency: 3 * time.Second},
			"critical":      {Pending: 5, Latency: 40 * time.Second},
			// Latency of a queue with nothing pending means nothing.
			"low":  {Pending: 0, Latency: time.Hour, Archived: 9},
			"push": {Pending: 1200, Retry: 30, Latency: 7 * time.Minute},
		},
		broken: map[string]bool{"webhook": true},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector{Inspector: insp, Queues: []string{"transactional", "critical", "low", "push", "webhook"}, LaneOf: func(q string) string { return lanes[q] }})
	want := `
# HELP newsletter_lane_oldest_pending_seconds Seconds the oldest pending task of a lane's queues has waited (0: none waiting). Every exporter reports the same numbers: aggregate with max.
# TYPE newsletter_lane_oldest_pending_seconds gauge
newsletter_lane_oldest_pending_seconds{lane="email"} 40
newsletter_lane_oldest_pending_seconds{lane="push"} 420
# HELP newsletter_lane_pending Tasks waiting to run in a lane's queues (pending; not retry, scheduled or archived): what its workers have to do now. Every exporter reports the same numbers: aggregate with max.
# TYPE newsletter_lane_pending gauge
newsletter_lane_pending{lane="email"} 7
newsletter_lane_pending{lane="push"} 1200
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "newsletter_lane_pending", "newsletter_lane_oldest_pending_seconds"); err != nil {
		t.Fatal(err)
	}
}
