package queuemetrics

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

var figureDesc = prometheus.NewDesc("test_figure", "A figure read from Redis.", nil, nil)

// slowCollector stands for a collector that reads Redis: it counts its
// readings and, while blocked, hangs like a reading from a paused Redis.
type slowCollector struct {
	readings atomic.Int64
	value    atomic.Int64
	mu       sync.Mutex
	blocked  chan struct{} // nil: answers at once
}

func (s *slowCollector) Describe(ch chan<- *prometheus.Desc) { ch <- figureDesc }
func (s *slowCollector) Collect(ch chan<- prometheus.Metric) {
	s.readings.Add(1)
	s.mu.Lock()
	b := s.blocked
	s.mu.Unlock()
	if b != nil {
		<-b
	}
	ch <- prometheus.MustNewConstMetric(figureDesc, prometheus.GaugeValue, float64(s.value.Load()))
}

func (s *slowCollector) block() {
	s.mu.Lock()
	s.blocked = make(chan struct{})
	s.mu.Unlock()
}

func (s *slowCollector) unblock() {
	s.mu.Lock()
	close(s.blocked)
	s.blocked = nil
	s.mu.Unlock()
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestCacheReadsOncePerTTL: many concurrent scrapes share one reading; the
// next reading comes only when the figures are ttl old.
func TestCacheReadsOncePerTTL(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	src := &slowCollector{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCache(5*time.Second, time.Minute, clk.now, src))
	scrape := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	scrape(50)
	if n := src.readings.Load(); n != 1 {
		t.Fatalf("50 scrapes read %d times, want once", n)
	}
	clk.add(4 * time.Second)
	scrape(10)
	if n := src.readings.Load(); n != 1 {
		t.Fatalf("scrapes within the ttl read again (%d readings)", n)
	}
	clk.add(time.Second)
	src.value.Store(7)
	scrape(10)
	if n := src.readings.Load(); n != 2 {
		t.Fatalf("after the ttl: %d readings, want 2", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP test_figure A figure read from Redis.\n# TYPE test_figure gauge\ntest_figure 7\n"), "test_figure"); err != nil {
		t.Fatal(err)
	}
}

// TestCacheAnswersWhileReadingHangs: a scrape waits for a hung reading no
// longer than the cache's wait: without figures before the first reading,
// with the last ones (and their age) after it; the hung reading is not
// started again by every scrape.
func TestCacheAnswersWhileReadingHangs(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	src := &slowCollector{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCache(5*time.Second, 50*time.Millisecond, clk.now, src))
	// gather returns what a scrape shows, failing the test if it does not
	// answer: the reading below hangs until the test ends it, so an
	// answer at all is the cache's wait at work.
	gather := func() map[string]float64 {
		t.Helper()
		got := make(chan map[string]float64, 1)
		go func() {
			fams, err := reg.Gather()
			if err != nil {
				t.Error(err)
			}
			m := map[string]float64{}
			for _, f := range fams {
				m[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
			}
			got <- m
		}()
		var m map[string]float64
		poll.True(t, 30*time.Second, "a scrape to answer while the reading hangs", func() bool {
			select {
			case m = <-got:
				return true
			default:
				return false
			}
		})
		return m
	}

	src.block()
	if m := gather(); len(m) != 0 {
		t.Fatalf("before any reading: %v, want no figures", m)
	}
	if m := gather(); len(m) != 0 || src.readings.Load() != 1 {
		t.Fatalf("second scrape: %v, %d readings; want no figures and the one reading in flight", m, src.readings.Load())
	}
	src.value.Store(3)
	src.unblock()
	poll.True(t, 30*time.Second, "the first figures", func() bool { return gather()["test_figure"] == 3 })

	clk.add(6 * time.Second)
	src.block()
	defer src.unblock()
	src.value.Store(9)
	m := gather()
	if m["test_figure"] != 3 || m["newsletter_queue_metrics_age_seconds"] != 6 {
		t.Fatalf("with the reading hung: %v, want the last figure (3), 6 s old", m)
	}
	if n := src.readings.Load(); n != 2 {
		t.Fatalf("%d readings, want 2", n)
	}
}
