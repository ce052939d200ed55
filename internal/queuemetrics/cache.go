package queuemetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The service's settings of NewCache: figures are read from Redis at most every
// CacheTTL, and a scrape waits at most RefreshWait for a new reading. A
// reading costs about a hundred Redis commands (asynq's inspector walks
// every queue), so without a cache the scrape rate was Redis's load, and a
// hung Redis held every scrape for the client's retries (15 s).
const (
	CacheTTL    = 5 * time.Second
	RefreshWait = 2 * time.Second
)

var ageDesc = prometheus.NewDesc("newsletter_queue_metrics_age_seconds",
	"Seconds since the figures read from Redis (newsletter_queue_tasks, asynq_*, newsletter_digest_run_recipients) were read. "+
		"They are read at most every 5 s; a scrape waits at most 2 s for a new reading and otherwise shows the last one, "+
		"so a high value means Redis is slow or unreachable.",
	nil, nil)

// Cache is a prometheus.Collector in front of collectors that read Redis
// at scrape time. It reads them at most once per ttl, however many scrapes
// arrive (concurrent scrapes share one reading), and a scrape waits at
// most wait for a reading in flight: past that it shows the last figures
// with their age (newsletter_queue_metrics_age_seconds), or none before
// the first reading, while the reading goes on in the background.
type Cache struct {
	collectors []prometheus.Collector
	ttl, wait  time.Duration
	now        func() time.Time

	mu      sync.Mutex
	metrics []prometheus.Metric
	readAt  time.Time     // when metrics were read; zero: never
	reading chan struct{} // closed when the reading in flight ends; nil: none
}

// NewCache caches what collectors export for ttl (CacheTTL in the
// service), waiting at most wait (RefreshWait) for a reading; now is the
// clock that decides when figures are old (nil: time.Now).
func NewCache(ttl, wait time.Duration, now func() time.Time, collectors ...prometheus.Collector) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{collectors: collectors, ttl: ttl, wait: wait, now: now}
}

// Describe implements prometheus.Collector. It describes nothing, which
// makes the cache an unchecked collector: asynq's collector describes
// itself by collecting, that is by reading Redis, and describing must not
// read Redis outside the cache (at registration, with a hung Redis, it
// would hang start-up). The registry still checks every gathered series
// for duplicates.
func (c *Cache) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *Cache) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var reading chan struct{}
	if c.readAt.IsZero() || c.now().Sub(c.readAt) >= c.ttl {
		if c.reading == nil {
			c.reading = make(chan struct{})
			go c.read(c.reading)
		}
		reading = c.reading
	}
	c.mu.Unlock()
	if reading != nil {
		t := time.NewTimer(c.wait)
		select {
		case <-reading:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	metrics, readAt := c.metrics, c.readAt
	c.mu.Unlock()
	if readAt.IsZero() {
		return // no figures yet: a gap, not zeros
	}
	for _, m := range metrics {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, max(c.now().Sub(readAt), 0).Seconds())
}

// read collects every collector into a new set of figures. Their metrics
// are constant (prometheus.MustNewConstMetric), so one reading can be sent
// to many scrapes.
func (c *Cache) read(done chan struct{}) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		for _, col := range c.collectors {
			col.Collect(ch)
		}
		close(ch)
	}()
	var metrics []prometheus.Metric
	for m := range ch {
		metrics = append(metrics, m)
	}
	c.mu.Lock()
	c.metrics, c.readAt, c.reading = metrics, c.now(), nil
	c.mu.Unlock()
	close(done)
}
