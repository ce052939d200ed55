package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/tasks"
)

// digestCmd is `newsletter digest run [--period P]`: it enqueues the plan
// exactly as the cron run does, so running it during the cron run, or twice,
// plans the period once.
func digestCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "run" {
		return errors.New("usage: newsletter digest run [--period 2026-W49]")
	}
	fs := flag.NewFlagSet("digest run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	period := fs.String("period", tasks.Period(time.Now()), "the period to plan (default: this ISO week)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	a, err := newApp(ctx, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	client := asynq.NewClientFromRedisClient(a.rdb)
	defer client.Close()
	dup, err := tasks.EnqueueDigestPlan(ctx, client, *period)
	if err != nil {
		return err
	}
	if dup {
		fmt.Fprintf(stdout, "digest %s is already queued or running\n", *period)
	} else {
		fmt.Fprintf(stdout, "digest %s queued; progress: GET /api/digests/%s\n", *period, *period)
	}
	return nil
}
