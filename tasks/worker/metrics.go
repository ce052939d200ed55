package worker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the worker's Prometheus metrics (docs/reference.md).
type Metrics struct {
	Tasks        *prometheus.CounterVec   // type, queue, result
	TaskDuration *prometheus.HistogramVec // type, queue
	Sent         *prometheus.CounterVec   // kind
	Failed       *prometheus.CounterVec   // kind, reason
}

// NewMetrics registers the metrics on reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_tasks_total", Help: "Tasks handled, by type, queue and result (success, retry, archived, deferred).",
		}, []string{"type", "queue", "result"}),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsletter_task_duration_seconds", Help: "Time a handler took.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"type", "queue"}),
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_emails_sent_total", Help: "Mails accepted by the mail server, by kind.",
		}, []string{"kind"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_emails_failed_total", Help: "Failed send attempts by kind and reason (temporary, throttled, bounced, rejected, invalid).",
		}, []string{"kind", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Tasks, m.TaskDuration, m.Sent, m.Failed)
	}
	return m
}
