package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestDigestOfAnEarlierVersionRefusesStart: a Redis whose latest digest
// run an earlier version began (its record without as_issue) and has not
// finished, with a batch of it still queued, stops a start with one line
// that says the way out, and queues nothing; once that run is finished,
// or its last task is gone (a dead batch deleted), the same start goes
// through.
func TestDigestOfAnEarlierVersionRefusesStart(t *testing.T) {
	rdb, redisURL := redistest.New(t, redistest.DBCommand)
	env := map[string]string{
		"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SMTP_URL": "smtp://127.0.0.1:2525",
		"NEWSLETTER_SECRET": "older-digest-test-secret",
	}
	ctx := context.Background()
	versionedStore(t, rdb) // the data as the earlier release left it
	// The run as an earlier version's startRunScript wrote it, planned to
	// two readers, neither counted yet.
	created := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	if err := rdb.HSet(ctx, "nl:digest:2026-W49", "items", "", "created", created, "audience", 2,
		"cursor", 2, "planned", 2, "state", "planned", "planned_at", created).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "nl:digest:latest", "2026-W49", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// One of its batches, as the earlier version queued it, waits for a
	// retry.
	batch := asynq.NewTask("email:digest", []byte(`{"period":"2026-W49","ids":[1,2]}`))
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(batch, asynq.Queue("critical"), asynq.TaskID("digest:2026-W49:1"), asynq.ProcessIn(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W50")
	want := "digest run 2026-W49 was begun by an earlier version and still has tasks in the critical queue: let the previous release finish them (progress: GET /api/digests/2026-W49; a dead one can be deleted in /monitoring), then start this one"
	if msg := strings.TrimSpace(errOut.String()); code == 0 || !strings.HasSuffix(msg, want) || strings.Count(msg, "\n") != 0 {
		t.Fatalf("exit %d, stderr %q; want one line ending %q", code, msg, want)
	}
	if n, err := rdb.Exists(ctx, "nl:digest:2026-W50").Result(); err != nil || n != 0 || out.Len() != 0 {
		t.Fatalf("the refused start did something: run %d %v, stdout %q", n, err, out.String())
	}

	// The batch is deleted (a dead letter, in /monitoring): its counts
	// still say unfinished, but nothing of it is left to finish.
	if err := asynq.NewInspectorFromRedisClient(rdb).DeleteTask("critical", "digest:2026-W49:1"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W50"); code != 0 {
		t.Fatalf("with none of the run's tasks left: exit %d: %s", code, errOut.String())
	}

	// The earlier version sent both (its marks): the run is finished.
	for _, id := range []int64{1, 2} {
		if err := rdb.SetBit(ctx, "nl:sent:digest:2026-W49", id, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W50"); code != 0 {
		t.Fatalf("after the run finished: exit %d: %s", code, errOut.String())
	}
}
