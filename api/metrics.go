package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP metrics, labelled by route pattern.
type Metrics struct {
	Requests *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	// Honeypot counts signups that filled the form's hidden field.
	Honeypot prometheus.Counter
	// RedisAck is the wait of each change's answer for the Redis
	// replicas (acked.go), by result: acked, timeout (too few in time:
	// answered 503) or error (Redis did not answer: 503 too).
	RedisAck *prometheus.HistogramVec
}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsletter_http_request_duration_seconds", Help: "HTTP request latency by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		Honeypot: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_signup_honeypot_total", Help: "Signups that filled the form's hidden field: bots, answered 202 and dropped.",
		}),
		RedisAck: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsletter_redis_ack_seconds", Help: "Wait of a change's answer for the Redis replicas (NEWSLETTER_REDIS_ACK_REPLICAS), by result: acked, timeout or error (both answered 503).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Duration, m.Honeypot, m.RedisAck)
	}
	return m
}

func (m *Metrics) observe(route string, code int, took time.Duration) {
	m.Requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.Duration.WithLabelValues(route).Observe(took.Seconds())
}
