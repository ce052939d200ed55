package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/store"
)

var digestRunDesc = prometheus.NewDesc("newsletter_digest_run_recipients",
	"Recipients of the latest digest run by outcome (planned, sent, skipped, failed, and bounced or complained after the 250), as GET /api/digests/{period} shows them.",
	[]string{"period", "outcome"}, nil)

// DigestCollector exports the latest digest run's counters, read from the
// store at scrape time: the store's bitmaps are the truth, so the metric
// agrees with the API whichever worker sent the mail.
type DigestCollector struct{ Store store.Digests }

// Describe implements prometheus.Collector.
func (c DigestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- digestRunDesc }

// Collect implements prometheus.Collector.
func (c DigestCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	period, err := c.Store.LatestDigestPeriod(ctx)
	if err != nil || period == "" {
		return
	}
	run, err := c.Store.DigestRun(ctx, period)
	if err != nil {
		return
	}
	for outcome, n := range map[string]int64{
		"planned": run.Planned, "sent": run.Sent, "skipped": run.Skipped, "failed": run.Failed,
		"bounced": run.Bounces, "complained": run.Complaints,
	} {
		ch <- prometheus.MustNewConstMetric(digestRunDesc, prometheus.GaugeValue, float64(n), period, outcome)
	}
}
