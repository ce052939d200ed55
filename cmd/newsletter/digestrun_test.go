package main

import (
	"context"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// A second `digest run` while the first one's plan waits says "already
// queued", the very status POST /api/digest/run answers in that case, and
// queues nothing more.
func TestDigestRunCommandSaysAlreadyQueued(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	env := map[string]string{
		"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SMTP_URL": "smtp://127.0.0.1:2525",
		"NEWSLETTER_SECRET": "digest-run-test-secret", "NEWSLETTER_REQUIRE_POSTAL_ADDRESS": "false",
	}
	ctx := context.Background()
	var lines []string
	for range 2 {
		var out, errOut strings.Builder
		if code := run2(ctx, env, &out, &errOut, "digest", "run", "--period", "2026-W30"); code != 0 {
			t.Fatalf("digest run: exit %d: %s", code, errOut.String())
		}
		lines = append(lines, strings.TrimSpace(out.String()))
	}
	want := []string{
		"digest 2026-W30 " + tasks.DigestQueued + "; progress: GET /api/digests/2026-W30",
		"digest 2026-W30 " + tasks.DigestAlreadyQueued + "; progress: GET /api/digests/2026-W30",
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("run %d printed %q, want %q", i+1, lines[i], want[i])
		}
	}
	if n, err := rdb.Exists(ctx, "asynq:{critical}:t:"+tasks.DigestPlanTaskID("2026-W30")).Result(); err != nil || n != 1 {
		t.Fatalf("the plan task: %d %v", n, err)
	}
}
