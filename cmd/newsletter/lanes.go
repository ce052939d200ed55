package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// workerFlags reads `newsletter worker [--lanes email,push,webhook,sms]`: the
// lanes this process serves, checked here so a typo stops start-up with
// the flag's name ("" when not given: NEWSLETTER_LANES decides).
func workerFlags(args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lanes := fs.String("lanes", "", "comma-separated lanes this worker serves: email, push, webhook, sms (default NEWSLETTER_LANES)")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected argument %q (usage: newsletter worker [--lanes email,push,webhook,sms])", fs.Arg(0))
	}
	if *lanes == "" {
		if flagGiven(fs, "lanes") {
			return "", errors.New("--lanes: want a comma-separated list of email, push, webhook, sms, got nothing")
		}
		return "", nil
	}
	if _, err := tasks.ParseLanes(*lanes); err != nil {
		return "", fmt.Errorf("--lanes: %w", err)
	}
	return *lanes, nil
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// withLanes is getenv with NEWSLETTER_LANES set to the --lanes flag: the
// flag stands for the variable in everything the configuration derives.
func withLanes(getenv func(string) string, lanes string) func(string) string {
	return func(k string) string {
		if k == "NEWSLETTER_LANES" {
			return lanes
		}
		return getenv(k)
	}
}

// workerConfig is the worker's configuration with one pool per configured
// lane (NEWSLETTER_LANES, --lanes): each with its own concurrency, and the
// push and webhook lanes with their own shared rates (the e-mail lane
// paces each mail in its handlers, by NEWSLETTER_SEND_RATE). Each lane
// runs the handlers whose tasks are in its queues.
func workerConfig(a *app) worker.Config {
	cfg := worker.Config{
		Concurrency: a.cfg.Concurrency, ShutdownTimeout: a.cfg.Shutdown, Log: a.log,
		PollInterval: a.cfg.PollInterval,
		Retry:        worker.RetryPolicy{Base: a.cfg.RetryBase, Busy: a.cfg.ClaimTTL},
		GroupGrace:   a.cfg.GroupGrace, GroupMaxDelay: a.cfg.GroupMaxDelay, GroupMaxSize: a.cfg.GroupMaxSize,
	}
	for _, name := range a.cfg.Lanes {
		l := worker.Lane{Name: name, Concurrency: a.cfg.laneConcurrency(name)}
		// No rate (0) is an added channel's that names none; the
		// built-in lanes' rates are at least 1.
		if r := a.cfg.laneRate(name); name != tasks.LaneEmail && r > 0 {
			l.Pace = pace.NewLane(a.rdb, name, r)
		}
		cfg.Lanes = append(cfg.Lanes, l)
	}
	return cfg
}

// pushLimits bound one post to a push service: a service that takes the
// connection and never answers holds a push worker this long, then the
// task is retried on the lane's backoff.
var pushLimits = netguard.Limits{Timeout: 15 * time.Second, MaxResponse: 4096}
