package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/webhooks"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynq/x/metrics"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/email/feedback/intake"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/queuemetrics"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/services/feeds"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
	"github.com/newsletter/newsletter/worker/catalogmail"
	"github.com/newsletter/newsletter/worker/schedule"
)

// roles selects what a process runs.
type roles struct {
	api, worker, scheduler, bounces bool
	// lanes is `worker --lanes` (empty: NEWSLETTER_LANES).
	lanes string
}

func (r roles) String() string {
	switch {
	case r.bounces && !r.api:
		return "bounces"
	case r.api && r.worker && r.scheduler:
		return "serve"
	case r.api:
		return "api"
	case r.worker:
		return "worker"
	}
	return "scheduler"
}

// serveCmd runs the given roles until SIGINT or SIGTERM, then shuts down
// in order: stop accepting HTTP, stop the relay and scheduler, stop taking
// tasks, wait up to NEWSLETTER_SHUTDOWN_TIMEOUT for running ones. It is
// these steps: set up, build the lanes, build the HTTP side, listen, start
// what runs in the background, wait for a signal, shut down.
func serveCmd(ctx context.Context, r roles, getenv func(string) string, stdout, stderr io.Writer) error {
	if r.lanes != "" {
		getenv = withLanes(getenv, r.lanes)
	}
	if r.api {
		getenv = withOwnBaseURL(getenv)
	}
	a, err := newApp(ctx, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	for _, w := range a.warnings {
		a.log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tstp := make(chan os.Signal, 1)
	signal.Notify(tstp, syscall.SIGTSTP)
	defer signal.Stop(tstp)

	if err := importCatalog(ctx, a); err != nil {
		return err
	}
	// Topics, the sequence and templates changed in the console reach
	// this process within catalog.DefaultRecheck.
	go a.catalog.Watch(ctx, catalog.DefaultRecheck)
	client := a.newClient()
	l, err := buildLanes(ctx, a, r, client)
	if err != nil {
		return err
	}
	metricsHandler := promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{})
	// With NEWSLETTER_METRICS_ADDR, /metrics is served there alone and the
	// main listener (public, for the API) has no such route.
	publicMetrics := metricsHandler
	if a.cfg.MetricsAddr != "" {
		publicMetrics = nil
	}
	var handler http.Handler
	if r.api {
		h, closeAPI, err := buildAPI(a, l, publicMetrics)
		if err != nil {
			return err
		}
		defer closeAPI()
		handler = h
	} else {
		handler = opsHandler(a, publicMetrics, l.mailbox)
	}
	srv, err := listen(a, handler, metricsHandler)
	if err != nil {
		return err
	}
	stopBackground, err := startBackground(ctx, a, r, l, client)
	if err != nil {
		srv.shutdown(a)
		return err
	}
	defer stopBackground()
	a.banner(r, srv.listen, srv.metricsListen, l.mailbox != nil)

	waitForStop(ctx, a, tstp, srv.errs, l.worker)
	srv.shutdown(a)
	if l.worker != nil {
		l.relay.Stop()
		l.worker.Stop() // take no new tasks while running ones finish
		l.worker.Shutdown()
	}
	a.log.Info("stopped")
	return nil
}

// lanes is what a process's worker role runs, and the mail parts the API
// shares with it (the dev mailbox, the issue renderer).
type lanes struct {
	worker  *worker.Worker // nil: no worker role
	relay   *tasks.Relay
	mailbox http.Handler // the dev mailbox; nil with a real transport
	issues  *issueMail   // nil where no mail transport was set up
	links   worker.Links
	// email is whether this worker sends mail (not `worker --lanes push`).
	email bool
}

// buildLanes sets up the mail transport where a role needs it and the
// worker with its handlers. A worker without the e-mail lane (`worker
// --lanes push`) has no mail transport to set up or check.
func buildLanes(ctx context.Context, a *app, r roles, client *asynq.Client) (*lanes, error) {
	l := &lanes{links: a.links(), email: r.worker && slices.Contains(a.cfg.Lanes, tasks.LaneEmail)}
	if l.email || r.api {
		if err := l.setUpMail(ctx, a); err != nil {
			return nil, err
		}
	}
	if !r.worker {
		return l, nil
	}
	l.worker = newWorker(ctx, a, l, client)
	l.relay = &tasks.Relay{Store: a.store, Queue: client, Log: a.log}
	return l, nil
}

// setUpMail makes the transport, the renderer and the issue renderer. A
// transport that cannot be set up stops a worker that sends mail; the API
// alone goes on without it (its previews need only the renderer).
func (l *lanes) setUpMail(ctx context.Context, a *app) error {
	m, box, err := a.newMailer(ctx)
	if err != nil && l.email {
		return err
	}
	render, rerr := liveRenderer(a)
	if rerr != nil {
		return rerr
	}
	if err != nil {
		return nil
	}
	mime, err := a.mimeComposer(m)
	if err != nil {
		return err
	}
	l.mailbox = box
	l.issues = &issueMail{render: render, links: l.links, mail: m, mime: mime, tags: a.tags}
	return nil
}

// newWorker is the worker of the lanes this process serves, wired once
// whichever they are: every component is built (worker.NewHandlers) and
// each lane runs the ones whose tasks are in its queues. Without the
// e-mail lane (`worker --lanes push`) there is no mail transport: its
// handlers are built without one and never run.
func newWorker(ctx context.Context, a *app, l *lanes, client *asynq.Client) *worker.Worker {
	metrics := worker.NewMetrics(a.reg)
	d := worker.Deps{
		BulkReady: a.settings.BulkReady,
		Store:     a.store, Log: a.log, Metrics: metrics, Links: l.links, Queue: client,
		ClaimTTL:     a.cfg.ClaimTTL,
		Notify:       &webhooks.Notifier{Endpoints: a.store, Queue: client, Log: a.log},
		PushRetry:    worker.RetryPolicy{Base: a.cfg.RetryBase, Busy: a.cfg.ClaimTTL},
		SMSRetry:     worker.RetryPolicy{Base: a.cfg.RetryBase, Busy: a.cfg.ClaimTTL},
		ChannelRetry: worker.RetryPolicy{Base: a.cfg.RetryBase, Busy: a.cfg.ClaimTTL},
	}
	if off := a.cfg.ClockOffset; off != 0 {
		// A testing knob (the soak's skewed worker): every component's
		// "is it due" reads this clock; asynq's own schedule does not.
		d.Now = func() time.Time { return time.Now().Add(off) }
		a.log.Warn("worker clock skewed by NEWSLETTER_CLOCK_OFFSET (testing only)", "offset", off)
	}
	buildChannels(a, &d)
	if l.email {
		// The sequence's steps are counted, and mails marked in a window
		// as wide as the lane's pool, only where mail is sent.
		metrics.ForSteps(a.catalog.Current().Templates())
		d.MarkWindow = a.cfg.Concurrency
		d.Mailer, d.Render = l.issues.mail, l.issues.render
		d.Pace, d.ConfirmPace = pace.New(a.rdb, a.cfg.SendRate), confirmPace(a)
		d.Depth, d.Quiet = worker.RedisQueueDepth{Redis: a.rdb}, quiet.New(a.cfg.Quiet)
		d.DigestBatch, d.MaxPendingBatches = a.cfg.DigestBatch, a.cfg.DigestMaxPending
		d.Tags, d.Feedback = a.tags, store.FeedbackPolicy{SoftLimit: a.cfg.SoftBounceLimit}
		d.Feeds = &feeds.Fetcher{UserAgent: feeds.DefaultUserAgent, Guard: a.cfg.Endpoints()}
		d.Imports, d.ImportStore, d.Audit = csvimport.NewJobs(a.rdb), a.store, a.audit
		d.ListJobs, d.ListStore, d.ListTasks = listjobs.NewJobs(a.rdb), a.store, asynq.NewInspectorFromRedisClient(a.rdb)
	}
	h := worker.NewHandlers(d)
	if l.email {
		// An edited sequence reaches the people in the middle of it: at
		// the start, and at each change made in the console (one realign
		// at a time; a change during one is realigned after it).
		insp := asynq.NewInspectorFromRedisClient(a.rdb)
		realign := func() {
			if n, err := h.Sequence.ReconcileSequence(ctx, a.store, insp); err != nil {
				a.log.Warn("sequence: realigning the waiting steps with the sequence failed; the next change or start tries again", "err", err)
			} else if n > 0 {
				a.log.Info("sequence: the sequence changed; next steps realigned", "subscribers", n)
			}
		}
		changed := make(chan struct{}, 1)
		// Called at once too: the first realign runs on the goroutine
		// below, and a change during it is realigned after it.
		a.catalog.OnChange(func(catalog.Snapshot) {
			select {
			case changed <- struct{}{}:
			default: // one is waiting already: it reads the latest
			}
		})
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-changed:
					realign()
				}
			}
		}()
	}
	return worker.New(a.rdb, workerConfig(a), h)
}

// buildAPI is the API role's handler: the API, the console, asynqmon and
// the dev mailbox. release closes what it holds open.
func buildAPI(a *app, l *lanes, publicMetrics http.Handler) (handler http.Handler, release func(), err error) {
	insp := asynq.NewInspectorFromRedisClient(a.rdb)
	batched, err := a.batchedRedis()
	if err != nil {
		return nil, nil, err
	}
	acker := replicaAcker(a)
	apiStore := store.NewRedis(batched).WithTopics(a.catalog).WithErasure(a.redact.Hash)
	apiClient := asynq.NewClientFromRedisClient(batched)
	jobs := tasks.NewDispatcher(apiClient, apiStore, a.log)
	mon := asynqmon.New(asynqmon.Options{
		RootPath: "/monitoring", RedisConnOpt: a.redisOpt,
		ReadOnly: a.cfg.MonitoringReadOnly, PrometheusAddress: a.cfg.PrometheusURL,
	})
	counted := countedRedirect(a, apiStore)
	release = func() {
		closeLogged(a.log, "asynqmon", mon)
		jobs.Close()
		// After the listeners stopped: the last clicks are written.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := counted.Recorder.Close(ctx); err != nil {
			a.log.Warn("engagement: counts not written at shutdown were dropped", "err", err)
		}
	}
	// One renderer (and so one preview cache) for the API and the
	// console.
	render := issueRenderer(a, l.issues)
	// One issues.Service and one subscribers.Service too: a move of an
	// issue, a change of the list, is the same from both.
	issueSvc := a.issueService(apiStore, jobs, render)
	images, err := a.mediaService()
	if err != nil {
		release()
		return nil, nil, err
	}
	notify := &webhooks.Notifier{Endpoints: apiStore, Queue: apiClient, Log: a.log}
	subs := listService(a, apiStore, jobs, apiClient, insp, notify)
	// One registry of webhook endpoints for the API and the console.
	hooks := &webhooks.Service{Store: apiStore, Queue: apiClient, Guard: a.cfg.Endpoints(), NewSecret: webhook.NewSecret}
	srv := api.New(api.Config{
		DoubleOptIn: a.cfg.DoubleOptIn, WelcomeDelay: a.cfg.WelcomeDelay, Topics: a.catalog,
		AdminToken: a.cfg.AdminToken, SubscribeRate: a.cfg.SubscribeRate, Clients: a.cfg.Clients,
		ConfirmHold: store.ConfirmHold{Every: a.cfg.ConfirmCooldown, PerDay: api.ConfirmationsPerDay},
		Origin:      a.cfg.BaseURL, UnsubscribeByEmail: a.cfg.UnsubscribeByEmail,
		RequestTimeout: a.cfg.RequestTimeout, ReadTrackers: readTrackers(a),
		VAPIDPublicKey: vapidPublicKey(a.cfg), AppPush: a.cfg.FCM != nil || a.cfg.APNs != nil, Endpoints: a.cfg.Endpoints(), SMSAuthToken: smsAuthToken(a.cfg.Config), SMSMaxSegments: smsMaxSegments(a.cfg.Config),
		SMSCountries: smsCountries(a.cfg.Config), SMSCodesPerClient: smsCodesPerClient(a.cfg.Config),
		Publisher: publisher(a.cfg.From), DKIMDomain: a.cfg.DKIMDomain,
	}, api.Deps{
		Settings: a.settings, SettingsStore: apiStore, Catalog: a.catalog, Templates: catalogmail.Builtins{},
		Store: apiStore, Jobs: jobs, Queue: apiClient, Tasks: insp, Signer: a.signer, Log: a.log,
		Metrics: api.NewMetrics(a.reg), MetricsHandler: publicMetrics, Guard: a.guard,
		Archive: apiStore, Markdown: archiveMarkdown,
		Audit: a.audit, AuditLog: apiStore, TestGate: a.cfg.TestGate, Imports: csvimport.NewJobs(a.rdb), Accounts: apiStore,
		ListJobs: subs.ListJobs, Notify: notify, Subscribers: subs,
		Engagement: apiStore, Webhooks: hooks, Checks: apiChannelChecks(a.reg, browserPushServices(a.cfg.Config)), IssueService: issueSvc, Acker: acker,
		IssueChecker: a.issueChecker(render), Media: images,
	}.WithIssues(apiStore, render))
	counted.Register(srv)
	mountSMSCallbacks(a, srv, apiStore)
	mountAddedRoutes(a, srv)
	mountProviderWebhooks(a, srv, apiClient)
	if l.mailbox != nil {
		srv.Handle("GET /dev/mailbox", l.mailbox)
	}
	if err := mountConsole(a, srv, consoleDeps{store: apiStore, jobs: jobs, queue: apiClient, insp: insp, render: render, steps: stepMailOf(l.issues), issues: issueSvc, checker: a.issueChecker(render), subs: subs, hooks: hooks, redis: a.rdb, media: images}); err != nil {
		release()
		return nil, nil, err
	}
	a.reg.MustRegister(redisFigures(insp, a.store, nil))
	srv.Handle("/monitoring/", srv.Monitoring(mon, a.cfg.BaseURL))
	if a.cfg.PProf {
		srv.Handle("/debug/pprof/", pprofHandler(a.guard))
	}
	return srv, release, nil
}

// countedRedirect is GET /r/{token} and GET /o/{token} (internal/engage):
// counts buffered in memory and written to st in batches.
func countedRedirect(a *app, st *store.Redis) *engage.Handler {
	m := engage.NewMetrics(a.reg)
	cfg := engage.RecorderConfig{}
	if a.cfg.Engagement == engage.PerPerson {
		cfg.PerPersonKeep = time.Duration(a.cfg.EngagementDays) * 24 * time.Hour
	}
	return &engage.Handler{
		Keys: a.engage, Links: st, Mode: a.cfg.Engagement, Opens: a.cfg.Opens, Metrics: m, Log: a.log,
		Recorder: engage.NewRecorder(st, cfg, m, a.log),
		Classify: &engage.Classifier{ScannerNets: a.cfg.ScannerNets, Addr: a.cfg.Clients.Addr},
	}
}

// serving is the HTTP listeners: NEWSLETTER_ADDR, and
// NEWSLETTER_METRICS_ADDR when /metrics is served apart.
type serving struct {
	servers               []*http.Server
	errs                  chan error // a server that stopped on its own
	listen, metricsListen string
}

// listen opens the listeners and serves on them.
func listen(a *app, handler, metricsHandler http.Handler) (*serving, error) {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_ADDR %s: %w", a.cfg.Addr, err)
	}
	s := &serving{servers: []*http.Server{newHTTPServer(handler)}, listen: ln.Addr().String()}
	// Shutdown waits for every request: the added channels' open
	// streams end first (channels.Streaming), and their browsers
	// reconnect elsewhere.
	for _, c := range a.added {
		if st, ok := c.(channels.Streaming); ok {
			s.servers[0].RegisterOnShutdown(st.CloseStreams)
		}
	}
	listeners := []net.Listener{ln}
	s.metricsListen = s.listen
	if a.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			_ = ln.Close() // nothing served on it yet
			return nil, fmt.Errorf("NEWSLETTER_METRICS_ADDR %s: %w", a.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler)
		s.servers, listeners = append(s.servers, newHTTPServer(mux)), append(listeners, mln)
		s.metricsListen = mln.Addr().String()
	}
	s.errs = make(chan error, len(s.servers))
	for i, srv := range s.servers {
		go func() { s.errs <- srv.Serve(listeners[i]) }()
	}
	return s, nil
}

// shutdown stops accepting requests and gives open ones 10 s.
func (s *serving) shutdown(a *app) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			a.log.Warn("http server: requests still open at shutdown were cut", "err", err)
		}
	}
}

// startBackground starts the worker and its relay, the SMTP check, the
// bounce intake and the scheduler, as the roles say. stop ends the ones
// that end at shutdown (the worker stops after the HTTP side, in serveCmd).
func startBackground(ctx context.Context, a *app, r roles, l *lanes, client *asynq.Client) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	if l.worker != nil {
		if err := l.worker.Start(); err != nil {
			return nil, err
		}
		a.log.Info("worker started", "lanes", strings.Join(l.worker.Lanes(), ","))
		l.relay.Start()
	}
	if l.email && a.cfg.EmailTransport != config.TransportSES && a.cfg.SMTP != nil {
		probeCtx, cancelProbe := context.WithCancel(ctx)
		probed := make(chan struct{})
		go func() { defer close(probed); probeSMTPAtStart(probeCtx, a.cfg, a.log) }()
		stops = append(stops, func() { cancelProbe(); <-probed })
	}
	if r.bounces || (r.api && r.worker && a.cfg.BounceSMTPAddr != "") {
		stopIntake, err := startIntake(a, client)
		if err != nil {
			stop()
			if l.worker != nil {
				l.relay.Stop()
				l.worker.Shutdown()
			}
			return nil, err
		}
		stops = append(stops, stopIntake)
	}
	if r.scheduler {
		sched := &schedule.Scheduler{Schedule: a.cfg.DigestSchedule, Queue: client, Log: a.log}
		// Always: a feed added in the console is read without a restart
		// (a round without feeds reads nothing).
		sched.FeedsInterval = a.cfg.FeedsInterval
		sched.Start()
		stops = append(stops, sched.Stop)
	}
	return stop, nil
}

// waitForStop returns on SIGINT or SIGTERM (ctx) or when a listener
// stops on its own. SIGTSTP stops the worker taking new tasks and waits
// on.
func waitForStop(ctx context.Context, a *app, tstp <-chan os.Signal, serveErr <-chan error, wrk *worker.Worker) {
	for {
		select {
		case <-tstp:
			if wrk != nil {
				a.log.Info("SIGTSTP: no new tasks will be started; running ones finish")
				wrk.Stop()
			}
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server stopped", "err", err)
			}
			return
		case <-ctx.Done():
			a.log.Info("shutting down")
			return
		}
	}
}

// newHTTPServer serves h with the bounds every listener of the service
// has: a slow client holds a connection for a bounded time, and its
// headers for at most maxHeaderBytes.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		MaxHeaderBytes: maxHeaderBytes}
}

// maxHeaderBytes bounds a request's headers (431 past it). Go's default
// of 1 MiB let a client that never finished its headers hold about
// 1.8 MB of the process per connection (1,000 connections: 1.8 GB);
// 32 KiB is what a reverse proxy such as nginx takes by default, and far
// more than a browser's cookies, a provider's signature headers or a
// console session need.
const maxHeaderBytes = 32 << 10

// redisFigures are the metrics read from Redis, behind one cache
// (queuemetrics.Cache): newsletter_queue_tasks per queue and state,
// asynq's own (asynq_queue_latency_seconds, …) and the latest digest run.
// They come from the API role, which always runs; every API replica
// reports the same numbers: dashboards and autoscaling aggregate them
// with max. now is the cache's clock (nil: time.Now).
func redisFigures(insp *asynq.Inspector, st store.Digests, now func() time.Time) *queuemetrics.Cache {
	return queuemetrics.NewCache(queuemetrics.CacheTTL, queuemetrics.RefreshWait, now,
		queuemetrics.Collector{Inspector: insp, Queues: tasks.Queues, LaneOf: tasks.LaneOf},
		metrics.NewQueueMetricsCollector(insp), api.DigestCollector{Store: st})
}

// confirmPace is the service-wide limit on confirmations, or nil when
// NEWSLETTER_CONFIRM_RATE is 0.
func confirmPace(a *app) worker.Pacer {
	if a.cfg.ConfirmRate == 0 {
		return nil
	}
	return pace.NewConfirmations(a.rdb, a.cfg.ConfirmRate)
}

// providerWebhooks are the providers' bounce and complaint webhooks that
// are configured (coming in; the webhooks this service sends are
// package webhook's).
func providerWebhooks(a *app) map[string]feedback.ProviderWebhook {
	w := map[string]feedback.ProviderWebhook{}
	if len(a.cfg.SESTopicARNs) > 0 {
		w["ses"] = &feedback.SES{TopicARNs: a.cfg.SESTopicARNs, Tags: a.tags, Log: a.log}
	}
	if a.cfg.SendGridPublicKey != "" {
		w["sendgrid"] = &feedback.SendGrid{Key: a.cfg.SendGridKey, Tags: a.tags}
	}
	if a.cfg.MailgunSigningKey != "" {
		w["mailgun"] = &feedback.Mailgun{SigningKey: []byte(a.cfg.MailgunSigningKey), Nonces: feedback.RedisNonces{Client: a.rdb}, Tags: a.tags}
	}
	if a.cfg.PostmarkToken != "" {
		w["postmark"] = &feedback.Postmark{Token: a.cfg.PostmarkToken, Tags: a.tags}
	}
	return w
}

// startIntake runs the bounce intake's SMTP server on
// NEWSLETTER_BOUNCE_SMTP_ADDR; the returned func stops it.
func startIntake(a *app, queue tasks.Enqueuer) (func(), error) {
	if a.cfg.BounceSMTPAddr == "" || a.cfg.BounceAddress == "" {
		return nil, errors.New("NEWSLETTER_BOUNCE_SMTP_ADDR and NEWSLETTER_BOUNCE_ADDRESS: both are needed for the bounce intake")
	}
	srv, err := intake.New(intake.Config{
		BounceAddress: a.cfg.BounceAddress, Domain: a.cfg.SMTPHelo, Tagger: a.tags, Consumer: worker.FeedbackQueue{Queue: queue},
		Metrics: intake.NewMetrics(a.reg), Log: a.log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", a.cfg.BounceSMTPAddr)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_BOUNCE_SMTP_ADDR %s: %w", a.cfg.BounceSMTPAddr, err)
	}
	a.log.Info("bounce intake listening", "addr", ln.Addr().String(), "address", a.cfg.BounceAddress)
	go func() {
		if err := srv.Serve(ln); err != nil {
			a.log.Error("bounce intake stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			a.log.Warn("bounce intake: sessions still open at shutdown were cut", "err", err)
		}
	}, nil
}

// links are the personal links of every mail this service sends.
func (a *app) links() worker.Links {
	l := worker.Links{BaseURL: a.cfg.BaseURL, Signer: a.signer, Topics: a.catalog, ListID: listID(a.cfg.From),
		// The cache reads Redis at most every few seconds; a mail waits
		// on that read no longer than on any other of its Redis reads.
		Newsletter: func() mailer.Newsletter { return worker.NewsletterOf(a.settings.Current(context.Background())) }}
	if a.cfg.Engagement != engage.Off {
		l.Engagement, l.Opens = a.engage, a.cfg.Opens
	}
	return l
}

// issueRenderer is r as the API's renderer, nil when there is none (not
// a nil pointer in an interface).
func issueRenderer(a *app, r *issueMail) issues.Renderer {
	if r == nil {
		return nil
	}
	return api.CachePreviews(r, func() string {
		return fmt.Sprintf("%d/%d", a.catalog.Snapshot().Gen, a.settings.Current(context.Background()).Version)
	})
}
