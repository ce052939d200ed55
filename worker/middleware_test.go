package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/tasks"
)

func TestObserveLogsAndCounts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	m := NewMetrics(nil)
	mw := Observe(log, m)
	results := []error{nil, errors.New("smtp 451"), asynq.SkipRetry, &Deferred{Reason: "rate", In: 1}}
	for _, res := range results {
		h := mw(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return res }))
		h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWelcomeEmail, nil))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(results) {
		t.Fatalf("%d log lines for %d tasks:\n%s", len(lines), len(results), buf.String())
	}
	var first map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	for _, k := range []string{"type", "id", "queue", "retry", "duration_ms", "result"} {
		if _, ok := first[k]; !ok {
			t.Errorf("log line lacks %s: %s", k, lines[0])
		}
	}
	wantResults := []string{"success", "retry", "archived", "deferred"}
	for i, l := range lines {
		if !strings.Contains(l, `"result":"`+wantResults[i]+`"`) {
			t.Errorf("task %d: %s, want result %s", i, l, wantResults[i])
		}
	}
	if got := testutil.ToFloat64(m.Tasks.WithLabelValues("", tasks.TypeWelcomeEmail, "", "deferred")); got != 1 {
		t.Fatalf("tasks_total{deferred} = %v", got)
	}
	// The run outside asynq (queue "") adds a series to those made ahead.
	if n := testutil.CollectAndCount(m.TaskDuration); n != len(tasks.HandledTypes())+1 {
		t.Fatalf("duration series: %d", n)
	}
	// The SkipRetry with no mail error is an invalid task, archived.
	if got := testutil.ToFloat64(m.Archived.WithLabelValues("", tasks.TypeWelcomeEmail, "", "invalid")); got != 1 {
		t.Fatalf("tasks_archived_total{cause=invalid} = %v", got)
	}
}

// TestCountersExistFromStart: every label value known in advance is a
// series at 0 before the first event, so increase() sees the first one.
func TestCountersExistFromStart(t *testing.T) {
	m := NewMetrics(nil)
	kinds, classes := len(mailer.Kinds()), len(email.Classes())
	for name, c := range map[string]struct {
		got, want int
	}{
		"sent":     {testutil.CollectAndCount(m.Sent), kinds},
		"failed":   {testutil.CollectAndCount(m.Failed), kinds * classes},
		"tasks":    {testutil.CollectAndCount(m.Tasks), len(tasks.HandledTypes()) * len(Results)},
		"archived": {testutil.CollectAndCount(m.Archived), len(tasks.HandledTypes()) * len(ArchiveCauses)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d series at start, want %d", name, c.got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.Failed.WithLabelValues(mailer.KindWelcome, email.Rejected.String())); got != 0 {
		t.Fatalf("failed{welcome,rejected} = %v at start", got)
	}
	if got := testutil.ToFloat64(m.Archived.WithLabelValues(tasks.LaneEmail, tasks.TypeIssueEmail, tasks.QueueCritical, "bounced")); got != 0 {
		t.Fatalf("archived{issue,critical,bounced} = %v at start", got)
	}
}
