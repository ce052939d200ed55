package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
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
	if err := a.settings.BulkReady(ctx); err != nil {
		return err
	}
	client := a.newClient()
	dup, err := tasks.EnqueueDigestPlan(ctx, client, *period)
	if err != nil {
		return err
	}
	status := tasks.DigestRunStatus(dup)
	a.note(ctx, audit.DigestRun, "digest:"+*period, status)
	// The API's status, word for word, so a script reads both alike.
	fmt.Fprintf(stdout, "digest %s %s; progress: GET /api/digests/%s\n", *period, status, *period)
	return nil
}

// healthcheckCmd is the container's HEALTHCHECK: GET /healthz on this
// process's own address (the image has no curl).
func healthcheckCmd(ctx context.Context, getenv func(string) string) error {
	addr := getenv("NEWSLETTER_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("NEWSLETTER_ADDR %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close() // only the status is read
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz answered %s", resp.Status)
	}
	return nil
}
