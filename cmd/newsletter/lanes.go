package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/store"
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
		if name != tasks.LaneEmail {
			l.Pace = pace.NewLane(a.rdb, name, a.cfg.laneRate(name))
		}
		cfg.Lanes = append(cfg.Lanes, l)
	}
	return cfg
}

// pushLimits bound one post to a push service: a service that takes the
// connection and never answers holds a push worker this long, then the
// task is retried on the lane's backoff.
var pushLimits = netguard.Limits{Timeout: 15 * time.Second, MaxResponse: 4096}

// pushSender is the web push client, nil without VAPID keys: the push
// lane then runs nothing and its tasks wait in its queue for a worker
// that has them.
func pushSender(a *app) webpush.Sender {
	if a.cfg.VAPID == nil {
		return nil
	}
	return webpush.NewClient(a.cfg.VAPID, a.cfg.Endpoints().Client(pushLimits))
}

// appGates are the app platforms this process can send to (FCM, APNs:
// each on when its settings are), each behind its own gate in the push
// lane (worker.AppGate); nil when neither is on.
func appGates(a *app) map[string]*worker.AppGate {
	gates := map[string]*worker.AppGate{}
	// Each platform may hold a quarter of the push lane's workers: a slow
	// one leaves the browsers and the other platform the rest.
	slots := max(1, a.cfg.PushConcurrency/4)
	if a.cfg.FCM != nil {
		c := &fcm.Client{Creds: a.cfg.FCM, BaseURL: a.cfg.FCMURL}
		if a.cfg.PushCAs != nil {
			c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
				Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
				TLSClientConfig: &tls.Config{RootCAs: a.cfg.PushCAs, MinVersion: tls.VersionTLS12},
			}}
		}
		gates[store.PlatformFCM] = worker.NewAppGate(fcmApp{c}, slots, 0)
		gates[store.PlatformFCM].Rate = pace.NewLane(a.rdb, "push:fcm", a.cfg.FCMRate)
	}
	if k := a.cfg.APNs; k != nil {
		c := &apns.Client{Key: k.Key, KeyID: k.KeyID, TeamID: k.TeamID, Topic: k.Topic, BaseURL: a.cfg.APNsURL,
			HTTP: apns.NewHTTPClient(a.cfg.PushCAs)}
		gates[store.PlatformAPNs] = worker.NewAppGate(apnsApp{c}, slots, 0)
		gates[store.PlatformAPNs].Rate = pace.NewLane(a.rdb, "push:apns", a.cfg.APNsRate)
	}
	if len(gates) == 0 {
		return nil
	}
	return gates
}

// fcmApp and apnsApp are the platforms' clients as the push lane's
// worker.AppSender.
type (
	fcmApp  struct{ c *fcm.Client }
	apnsApp struct{ c *apns.Client }
)

func (f fcmApp) SendApp(ctx context.Context, token string, n webpush.Notification) error {
	return f.c.Send(ctx, token, fcm.Notification{Title: n.Title, Body: n.Body, URL: n.URL})
}

func (a apnsApp) SendApp(ctx context.Context, token string, n webpush.Notification) error {
	return a.c.Send(ctx, token, apns.Notification{Title: n.Title, Body: n.Body, URL: n.URL})
}
