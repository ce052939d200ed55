package queuemetrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// TestQueueFiguresOnCluster: the queue figures are read from a Redis
// Cluster as serve.go reads them (an Inspector on the app's client, behind
// the Cache, beside asynq's own collector): each queue's states from the
// primary that holds it, a queue never used as zeros, the lanes added up.
func TestQueueFiguresOnCluster(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	rdb, err := redisconn.Client(redisconn.Cluster{Addrs: c.Addrs()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	client := asynq.NewClientFromRedisClient(rdb)
	ctx := context.Background()
	for i, q := range []string{"critical", "critical", "low", "push"} {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte(fmt.Sprint(i))), asynq.Queue(q)); err != nil {
			t.Fatalf("enqueue on %s: %v", q, err)
		}
	}
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte("later")), asynq.Queue("low"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatalf("enqueue for later: %v", err)
	}

	insp := asynq.NewInspectorFromRedisClient(rdb)
	lanes := map[string]string{"critical": "email", "low": "email", "push": "push", "webhook": "webhook"}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCache(0, time.Minute, nil, // ttl 0: every gather reads Redis
		Collector{Inspector: insp, Queues: []string{"critical", "low", "push", "webhook"}, LaneOf: func(q string) string { return lanes[q] }},
		metrics.NewQueueMetricsCollector(insp)))
	want := `
# HELP newsletter_lane_pending Tasks waiting to run in a lane's queues (pending; not retry, scheduled or archived): what its workers have to do now. Every exporter reports the same numbers: aggregate with max.
# TYPE newsletter_lane_pending gauge
newsletter_lane_pending{lane="email"} 3
newsletter_lane_pending{lane="push"} 1
newsletter_lane_pending{lane="webhook"} 0
`
	poll.Until(t, poll.BusyMachine, func() error {
		return testutil.GatherAndCompare(reg, strings.NewReader(want), "newsletter_lane_pending")
	})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	asynqSeries := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case f.GetName() == "newsletter_queue_tasks":
				got[labels["queue"]+"/"+labels["state"]] = m.GetGauge().GetValue()
			case strings.HasPrefix(f.GetName(), "asynq_"):
				asynqSeries++
			}
		}
	}
	for key, want := range map[string]float64{"critical/pending": 2, "low/pending": 1, "low/scheduled": 1, "push/pending": 1, "webhook/pending": 0} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("newsletter_queue_tasks %s = %v (exported: %v), want %v", key, v, ok, want)
		}
	}
	if asynqSeries == 0 {
		t.Error("asynq's own collector exported nothing from the cluster")
	}
}
