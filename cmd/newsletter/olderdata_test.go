package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// TestDigestOfAnEarlierVersionRefusesStart: while the critical queue holds
// a task only an earlier version runs (one of its email:digest batches
// waiting for a retry, or the plan of a run it began), a start stops with
// one line that says the way out and does nothing; a batch that died
// (archived) does not hold it, and neither does this version's own plan.
func TestDigestOfAnEarlierVersionRefusesStart(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	env := map[string]string{
		"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SMTP_URL": "smtp://127.0.0.1:2525",
		"NEWSLETTER_SECRET": "older-digest-test-secret", "NEWSLETTER_REQUIRE_POSTAL_ADDRESS": "false",
	}
	ctx := context.Background()
	versionedStore(t, rdb) // the data as the earlier release left it
	// The run as an earlier version's startRunScript wrote it: planned to
	// two readers, without as_issue.
	created := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	if err := rdb.HSet(ctx, "nl:{pub}:digest:2026-W49", "items", "", "created", created, "audience", 2,
		"cursor", 2, "planned", 2, "state", "planned", "planned_at", created).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "nl:{pub}:digest:latest", "2026-W49", 0).Err(); err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	start := func() (int, string, string) {
		var out, errOut strings.Builder
		code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W50")
		return code, strings.TrimSpace(errOut.String()), out.String()
	}
	refused := func(step string) {
		t.Helper()
		code, msg, out := start()
		want := "digest run 2026-W49 was begun by an earlier version and still has tasks in the critical queue: let the previous release finish them (progress: GET /api/digests/2026-W49), then start this one"
		if code == 0 || !strings.HasSuffix(msg, want) || strings.Count(msg, "\n") != 0 {
			t.Fatalf("%s: exit %d, stderr %q; want one line ending %q", step, code, msg, want)
		}
		if n, err := rdb.Exists(ctx, "nl:{pub}:digest:2026-W50").Result(); err != nil || n != 0 || out != "" {
			t.Fatalf("%s: the refused start did something: run %d %v, stdout %q", step, n, err, out)
		}
	}

	// One of its batches, as the earlier version queued it, waits for a
	// retry: refused.
	batch := asynq.NewTask("email:digest", []byte(`{"period":"2026-W49","ids":[1,2]}`))
	if _, err := client.Enqueue(batch, asynq.Queue(tasks.QueueCritical), asynq.TaskID("digest:2026-W49:1"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	refused("a batch scheduled")

	// The batch died (archived): no version runs it on its own, so it
	// holds nothing.
	if err := insp.ArchiveTask(tasks.QueueCritical, "digest:2026-W49:1"); err != nil {
		t.Fatal(err)
	}
	if code, msg, _ := start(); code != 0 {
		t.Fatalf("with the run's batch dead: exit %d: %s", code, msg)
	}

	// A run the earlier version began and was still planning, with its
	// plan queued: refused; this version's own run of a period is not.
	if err := rdb.HSet(ctx, "nl:{pub}:digest:2026-W48", "items", "", "created", created, "audience", 2, "state", "planning").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(tasks.NewDigestPlan("2026-W48"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	code, msg, _ := start()
	if want := "digest run 2026-W48 was begun by an earlier version"; code == 0 || !strings.Contains(msg, want) {
		t.Fatalf("an older run's plan queued: exit %d, stderr %q; want %q", code, msg, want)
	}
	if err := insp.DeleteTask(tasks.QueueCritical, tasks.DigestPlanTaskID("2026-W48")); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(tasks.NewDigestPlan("2026-W51"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if code, msg, _ := start(); code != 0 {
		t.Fatalf("with only this version's plan queued: exit %d: %s", code, msg)
	}
}
