package engage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/store"
)

// Writer is where the recorder's batches go (the store).
type Writer interface {
	RecordEngagement(ctx context.Context, w store.EngagementWrite) (store.EngagementWrite, error)
}

// Event is one counted click or open.
type Event struct {
	Issue int64
	// Index is the link's; ignored for an open.
	Index      int
	Open       bool
	Machine    bool
	ReaderHash string
	// Reader is the reader's id, kept only in per-person mode (and only
	// for a person's click).
	Reader int64
	At     time.Time
	// Sent is when the mail was made: the hourly counts run
	// store.EngagementHours from it.
	Sent time.Time
}

// RecorderConfig tunes a Recorder.
type RecorderConfig struct {
	// MaxPending bounds the events held (waiting for a flush, or for
	// Redis to come back); past it new ones are dropped and counted in
	// the metric. Default 200,000.
	MaxPending int
	// FlushEvery is how often the buffer is written (and as soon as it is
	// half full). Default 1 s; negative: only when Flush or Close is
	// called (tests).
	FlushEvery time.Duration
	// PerPersonKeep > 0 keeps each person's clicks that long
	// (NEWSLETTER_ENGAGEMENT=per-person).
	PerPersonKeep time.Duration
	// WriteTimeout bounds one flush. Default 5 s.
	WriteTimeout time.Duration
}

// Recorder gathers events in memory and writes them in batches, so the
// redirect never waits on Redis. A failed write is kept and tried again
// with the next flush, within MaxPending.
type Recorder struct {
	w       Writer
	cfg     RecorderConfig
	log     *slog.Logger
	metrics *Metrics

	mu      sync.Mutex
	pending int
	issues  map[int64]*issueBuf
	clicks  []store.PersonClick

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// issueBuf is one issue's events since the last write, the readers as
// sets.
type issueBuf struct {
	events  int
	links   map[int]*linkBuf
	opens   int64
	mopens  int64
	openers map[string]struct{}
	hours   map[int64]*store.HourCount
	tens    map[int64]*store.HourCount // store.FineBucket's buckets, in the first store.FineHours
}

type linkBuf struct {
	clicks, machine int64
	readers         map[string]struct{}
}

// NewRecorder starts a recorder writing to w; Close flushes it and stops.
func NewRecorder(w Writer, cfg RecorderConfig, m *Metrics, log *slog.Logger) *Recorder {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 200_000
	}
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	r := &Recorder{w: w, cfg: cfg, log: log, metrics: m, issues: map[int64]*issueBuf{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.FlushEvery > 0 {
		go r.loop()
	} else {
		close(r.done)
	}
	return r
}

// Record adds e to the buffer; false when the buffer is full and e was
// dropped (counted).
func (r *Recorder) Record(e Event) bool {
	kind := "click"
	if e.Open {
		kind = "open"
	}
	result := "person"
	if e.Machine {
		result = "machine"
	}
	r.mu.Lock()
	if r.pending >= r.cfg.MaxPending {
		r.mu.Unlock()
		r.metrics.Events.WithLabelValues(kind, "dropped").Inc()
		return false
	}
	r.pending++
	b := r.issues[e.Issue]
	if b == nil {
		b = &issueBuf{links: map[int]*linkBuf{}, openers: map[string]struct{}{}, hours: map[int64]*store.HourCount{}, tens: map[int64]*store.HourCount{}}
		r.issues[e.Issue] = b
	}
	b.events++
	one := store.HourCount{}
	switch {
	case e.Open && e.Machine:
		b.mopens++
		one.MachineOpens = 1
	case e.Open:
		b.opens++
		one.Opens = 1
		b.openers[e.ReaderHash] = struct{}{}
	default:
		l := b.links[e.Index]
		if l == nil {
			l = &linkBuf{readers: map[string]struct{}{}}
			b.links[e.Index] = l
		}
		if e.Machine {
			l.machine++
			one.MachineClicks = 1
		} else {
			l.clicks++
			one.Clicks = 1
			l.readers[e.ReaderHash] = struct{}{}
			if r.cfg.PerPersonKeep > 0 && e.Reader > 0 {
				r.clicks = append(r.clicks, store.PersonClick{Subscriber: e.Reader, Issue: e.Issue, Link: e.Index, At: e.At})
			}
		}
	}
	// The hours of the chart (past them: counted in the totals only),
	// and the first hours again in finer buckets: the chart of a send
	// just begun.
	since := e.At.Sub(e.Sent)
	if since < store.EngagementHours*time.Hour {
		addCount(b.hours, e.At.Unix()/3600, one)
	}
	if since < store.FineHours*time.Hour {
		addCount(b.tens, e.At.Unix()/int64(store.FineBucket/time.Second), one)
	}
	full := r.pending >= r.cfg.MaxPending/2
	r.mu.Unlock()
	r.metrics.Events.WithLabelValues(kind, result).Inc()
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// addCount adds c to bucket k of counts.
func addCount(counts map[int64]*store.HourCount, k int64, c store.HourCount) {
	hc := counts[k]
	if hc == nil {
		hc = &store.HourCount{}
		counts[k] = hc
	}
	hc.Clicks += c.Clicks
	hc.MachineClicks += c.MachineClicks
	hc.Opens += c.Opens
	hc.MachineOpens += c.MachineOpens
}

// Pending is how many events wait to be written.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.WriteTimeout)
		if err := r.Flush(ctx); err != nil {
			r.log.Warn("engagement: counts not written yet; kept and tried again", "err", err, "pending", r.Pending())
		}
		cancel()
	}
}

// Flush writes what the buffer holds; what could not be written goes
// back into it (within MaxPending: the rest is dropped and counted).
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	issues, clicks := r.issues, r.clicks
	events := map[int64]int{}
	for id, b := range issues {
		events[id] = b.events
	}
	pending := r.pending
	r.issues, r.clicks, r.pending = map[int64]*issueBuf{}, nil, 0
	r.mu.Unlock()
	if len(issues) == 0 && len(clicks) == 0 {
		return nil
	}
	w := store.EngagementWrite{Clicks: clicks, Keep: r.cfg.PerPersonKeep}
	for id, b := range issues {
		w.Batches = append(w.Batches, b.batch(id))
	}
	left, err := r.w.RecordEngagement(ctx, w)
	if err == nil {
		r.metrics.Flushes.WithLabelValues("ok").Inc()
		r.metrics.Written.Add(float64(pending))
		return nil
	}
	r.metrics.Flushes.WithLabelValues("error").Inc()
	r.putBack(left, events)
	return err
}

// batch is the store's form of the buffer of issue id.
func (b *issueBuf) batch(id int64) store.EngagementBatch {
	out := store.EngagementBatch{Issue: id, Links: map[int]*store.LinkCounts{}, Opens: b.opens, MachineOpens: b.mopens,
		Openers: setList(b.openers), Hours: b.hours, Tens: b.tens}
	for i, l := range b.links {
		out.Links[i] = &store.LinkCounts{Clicks: l.clicks, MachineClicks: l.machine, Readers: setList(l.readers)}
	}
	return out
}

func setList(s map[string]struct{}) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	return out
}

// putBack merges an unwritten write into the buffer, dropping (and
// counting) what would pass MaxPending.
func (r *Recorder) putBack(left store.EngagementWrite, events map[int64]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lb := range left.Batches {
		n := events[lb.Issue]
		if r.pending+n > r.cfg.MaxPending {
			r.metrics.Events.WithLabelValues("any", "dropped").Add(float64(n))
			continue
		}
		r.pending += n
		b := r.issues[lb.Issue]
		if b == nil {
			b = &issueBuf{links: map[int]*linkBuf{}, openers: map[string]struct{}{}, hours: map[int64]*store.HourCount{}, tens: map[int64]*store.HourCount{}}
			r.issues[lb.Issue] = b
		}
		b.events += n
		b.opens += lb.Opens
		b.mopens += lb.MachineOpens
		for _, o := range lb.Openers {
			b.openers[o] = struct{}{}
		}
		for h, c := range lb.Hours {
			addCount(b.hours, h, *c)
		}
		for k, c := range lb.Tens {
			addCount(b.tens, k, *c)
		}
		for i, lc := range lb.Links {
			l := b.links[i]
			if l == nil {
				l = &linkBuf{readers: map[string]struct{}{}}
				b.links[i] = l
			}
			l.clicks += lc.Clicks
			l.machine += lc.MachineClicks
			for _, rd := range lc.Readers {
				l.readers[rd] = struct{}{}
			}
		}
	}
	// The people's clicks ride with their issue's counts: kept while
	// there is room.
	room := max(0, r.cfg.MaxPending-r.pending)
	if len(left.Clicks) > room {
		r.metrics.Events.WithLabelValues("person_click", "dropped").Add(float64(len(left.Clicks) - room))
		left.Clicks = left.Clicks[:room]
	}
	r.clicks = append(r.clicks, left.Clicks...)
}

// Close stops the flushing and writes what is left, trying until ctx
// ends (shutdown).
func (r *Recorder) Close(ctx context.Context) error {
	r.closeOnce.Do(func() { close(r.stop) })
	<-r.done
	for {
		err := r.Flush(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			n := r.Pending()
			r.metrics.Events.WithLabelValues("any", "dropped").Add(float64(n))
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Metrics are the counted redirect's.
type Metrics struct {
	Events  *prometheus.CounterVec
	Flushes *prometheus.CounterVec
	Written prometheus.Counter
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_engagement_events_total",
			Help: "Clicks and opens by kind (click, open) and result: person, machine (scanners, proxies), honeypot (the hidden link: a scanner), test (a test send's link, led on and not counted), refused (a token we did not sign), dropped (the buffer was full while Redis was away).",
		}, []string{"kind", "result"}),
		Flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_engagement_flushes_total",
			Help: "Writes of the engagement buffer to Redis by result (ok, error: kept and tried again).",
		}, []string{"result"}),
		Written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_engagement_written_total", Help: "Clicks and opens written to Redis.",
		}),
	}
	// Every known label from start-up, at 0, so increase() sees the
	// first event.
	for _, k := range []string{"click", "open"} {
		for _, r := range []string{"person", "machine", "refused", "dropped"} {
			m.Events.WithLabelValues(k, r)
		}
	}
	m.Events.WithLabelValues("click", "honeypot")
	m.Events.WithLabelValues("any", "dropped")
	m.Events.WithLabelValues("person_click", "dropped")
	m.Flushes.WithLabelValues("ok")
	m.Flushes.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.Events, m.Flushes, m.Written)
	}
	return m
}
