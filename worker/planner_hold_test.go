package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/tasks"
)

// TestDigestHeldWithoutPostalAddress: the cron's digest plan fails before
// it touches the store (no Store here: a read would panic) while bulk
// mail is not allowed, so asynq retries it; allowed, it goes on.
func TestDigestHeldWithoutPostalAddress(t *testing.T) {
	h := &Planner{Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BulkReady: func(context.Context) error { return settings.ErrNoPostalAddress }}
	err := h.HandleDigestPlan(context.Background(), tasks.DigestPlanPayload{Period: "2026-W10"})
	if !errors.Is(err, settings.ErrNoPostalAddress) {
		t.Fatalf("held plan: %v", err)
	}
}
