package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynq/x/metrics"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/csvimport"
	"github.com/newsletter/newsletter/internal/feedback"
	"github.com/newsletter/newsletter/internal/feedback/intake"
	"github.com/newsletter/newsletter/internal/feeds"
	"github.com/newsletter/newsletter/internal/health"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/queuemetrics"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/webhook"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/tasks/schedule"
	"github.com/newsletter/newsletter/tasks/worker"
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
// tasks, wait up to NEWSLETTER_SHUTDOWN_TIMEOUT for running ones.
func serveCmd(ctx context.Context, r roles, getenv func(string) string, stdout, stderr io.Writer) error {
	if r.lanes != "" {
		getenv = withLanes(getenv, r.lanes)
	}
	a, err := newApp(ctx, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	for _, w := range a.warnings {
		a.log.Warn(w)
	}
	// The commands run beside the service (import) read and write the
	// topics it runs with, whatever their own environment says.
	if err := a.store.SetServiceTopics(ctx, a.cfg.Topics); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tstp := make(chan os.Signal, 1)
	signal.Notify(tstp, syscall.SIGTSTP)
	defer signal.Stop(tstp)

	client := a.newClient()
	metricsHandler := promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{})
	// With NEWSLETTER_METRICS_ADDR, /metrics is served there alone and the
	// main listener (public, for the API) has no such route.
	publicMetrics := metricsHandler
	if a.cfg.MetricsAddr != "" {
		publicMetrics = nil
	}

	var (
		wrk     *worker.Worker
		relay   *tasks.Relay
		mailbox http.Handler
		issues  *issueMail
	)
	links := a.links()
	// A worker without the e-mail lane (`worker --lanes push`) has no
	// mail transport to set up or check.
	emailLane := r.worker && slices.Contains(a.cfg.Lanes, tasks.LaneEmail)
	if emailLane || r.api {
		m, box, err := a.newMailer(ctx)
		if err != nil && emailLane {
			return err
		}
		render, rerr := mailer.NewRenderer(a.cfg.TemplateDir, a.cfg.Topics.Templates()...)
		if rerr != nil {
			return fmt.Errorf("NEWSLETTER_TEMPLATE_DIR: %w", rerr)
		}
		if err == nil {
			mime, err := a.mimeComposer(m)
			if err != nil {
				return err
			}
			mailbox = box
			issues = &issueMail{render: render, links: links, mail: m, mime: mime, tags: a.tags}
		}
	}
	if r.worker && !emailLane {
		m := worker.NewMetrics(a.reg)
		wrk = worker.New(a.rdb, workerConfig(a, m), worker.Handlers{Metrics: m})
		relay = &tasks.Relay{Store: a.store, Queue: client, Log: a.log}
	} else if r.worker {
		m, render := issues.mail, issues.render
		metrics := worker.NewMetrics(a.reg).ForSteps(a.cfg.Topics.Templates())
		h := worker.NewHandlers(worker.Deps{
			Store: a.store, Mailer: m, Render: render, Log: a.log, Metrics: metrics,
			Links: links,
			Pace:  pace.New(a.rdb, a.cfg.SendRate), ConfirmPace: confirmPace(a),
			Queue: client, Depth: worker.RedisQueueDepth{Redis: a.rdb}, Quiet: quiet.New(a.cfg.Quiet),
			DigestBatch: a.cfg.DigestBatch, MaxPendingBatches: a.cfg.DigestMaxPending,
			ClaimTTL: a.cfg.ClaimTTL, MarkWindow: a.cfg.Concurrency,
			Tags: a.tags, Feedback: store.FeedbackPolicy{SoftLimit: a.cfg.SoftBounceLimit},
			Notify:      &tasks.WebhookNotifier{Endpoints: a.store, Queue: client, Log: a.log},
			WebhookPost: webhook.NewSender(a.cfg.Endpoints()),
			Feeds:       &feeds.Fetcher{UserAgent: feeds.DefaultUserAgent, Guard: a.cfg.Endpoints()},
			Imports:     csvimport.NewJobs(a.rdb), ImportStore: a.store, Audit: a.audit,
		})
		// An edited sequence reaches the people in the middle of it.
		if n, err := h.Sequence.ReconcileSequence(ctx, a.store, asynq.NewInspectorFromRedisClient(a.rdb)); err != nil {
			a.log.Warn("sequence: realigning the waiting steps with the topics file failed; the next start tries again", "err", err)
		} else if n > 0 {
			a.log.Info("sequence: the topics file changed; next steps realigned", "subscribers", n)
		}
		wrk = worker.New(a.rdb, workerConfig(a, metrics), h)
		relay = &tasks.Relay{Store: a.store, Queue: client, Log: a.log}
	}

	var handler http.Handler
	if r.api {
		insp := asynq.NewInspectorFromRedisClient(a.rdb)
		batched, err := a.batchedRedis()
		if err != nil {
			return err
		}
		apiStore := store.NewRedis(batched).WithTopics(a.cfg.Topics).WithErasure(a.redact.Hash)
		apiClient := asynq.NewClientFromRedisClient(batched)
		jobs := tasks.NewDispatcher(apiClient, apiStore, a.log)
		defer jobs.Close()
		// One renderer (and so one preview cache) for the API and the
		// console.
		render := issueRenderer(issues)
		srv := api.New(api.Config{
			DoubleOptIn: a.cfg.DoubleOptIn, WelcomeDelay: a.cfg.WelcomeDelay, Topics: a.cfg.Topics,
			AdminToken: a.cfg.AdminToken, SubscribeRate: a.cfg.SubscribeRate, Clients: a.cfg.Clients,
			ConfirmHold: store.ConfirmHold{Every: a.cfg.ConfirmCooldown, PerDay: api.ConfirmationsPerDay},
			Origin:      a.cfg.BaseURL, UnsubscribeByEmail: a.cfg.UnsubscribeByEmail,
			RequestTimeout: a.cfg.RequestTimeout,
			VAPIDPublicKey: vapidPublicKey(a.cfg), Endpoints: a.cfg.Endpoints(),
			Publisher: publisher(a.cfg.From),
		}, api.Deps{
			Store: apiStore, Jobs: jobs, Queue: apiClient, Tasks: insp, Signer: a.signer, Log: a.log,
			Metrics: api.NewMetrics(a.reg), MetricsHandler: publicMetrics, Guard: a.guard,
			Webhooks: webhooks(a), Archive: apiStore, Markdown: archiveMarkdown,
			Audit: a.audit, AuditLog: apiStore, TestGate: a.cfg.TestGate, Imports: csvimport.NewJobs(a.rdb),
			Notify: &tasks.WebhookNotifier{Endpoints: apiStore, Queue: apiClient, Log: a.log},
		}.WithIssues(apiStore, render))
		if mailbox != nil {
			srv.Handle("GET /dev/mailbox", mailbox)
		}
		if err := mountConsole(a, srv, consoleDeps{store: apiStore, jobs: jobs, queue: apiClient, insp: insp, render: render, redis: a.rdb}); err != nil {
			return err
		}
		a.reg.MustRegister(redisFigures(insp, a.store, nil))
		mon := asynqmon.New(asynqmon.Options{
			RootPath: "/monitoring", RedisConnOpt: a.redisOpt,
			ReadOnly: a.cfg.MonitoringReadOnly, PrometheusAddress: a.cfg.PrometheusURL,
		})
		defer closeLogged(a.log, "asynqmon", mon)
		srv.Handle("/monitoring/", srv.Monitoring(mon, a.cfg.BaseURL))
		if a.cfg.PProf {
			srv.Handle("/debug/pprof/", pprofHandler(a.guard))
		}
		handler = srv
	} else {
		handler = opsHandler(a, publicMetrics, mailbox)
	}

	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("NEWSLETTER_ADDR %s: %w", a.cfg.Addr, err)
	}
	servers := []*http.Server{newHTTPServer(handler)}
	listeners := []net.Listener{ln}
	metricsListen := ln.Addr().String()
	if a.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			_ = ln.Close() // nothing served on it yet
			return fmt.Errorf("NEWSLETTER_METRICS_ADDR %s: %w", a.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler)
		servers, listeners = append(servers, newHTTPServer(mux)), append(listeners, mln)
		metricsListen = mln.Addr().String()
	}
	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { serveErr <- srv.Serve(listeners[i]) }()
	}

	if wrk != nil {
		if err := wrk.Start(); err != nil {
			return err
		}
		a.log.Info("worker started", "lanes", strings.Join(wrk.Lanes(), ","))
		relay.Start()
	}
	if emailLane && a.cfg.EmailTransport != config.TransportSES && a.cfg.SMTP != nil {
		probeCtx, cancelProbe := context.WithCancel(ctx)
		probed := make(chan struct{})
		go func() { defer close(probed); probeSMTPAtStart(probeCtx, a.cfg, a.log) }()
		defer func() { cancelProbe(); <-probed }()
	}
	if r.bounces || (r.api && r.worker && a.cfg.BounceSMTPAddr != "") {
		stopIntake, err := startIntake(a, client)
		if err != nil {
			return err
		}
		defer stopIntake()
	}
	if r.scheduler {
		sched := &schedule.Scheduler{Schedule: a.cfg.DigestSchedule, Queue: client, Log: a.log}
		if len(a.cfg.Topics.Feeds()) > 0 {
			sched.FeedsInterval = a.cfg.FeedsInterval
		}
		sched.Start()
		defer sched.Stop()
	}
	a.banner(r, ln.Addr().String(), metricsListen, mailbox != nil)

	for {
		select {
		case <-tstp:
			if wrk != nil {
				a.log.Info("SIGTSTP: no new tasks will be started; running ones finish")
				wrk.Stop()
			}
			continue
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http server stopped", "err", err)
			}
		case <-ctx.Done():
			a.log.Info("shutting down")
		}
		break
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			a.log.Warn("http server: requests still open at shutdown were cut", "err", err)
		}
	}
	if wrk != nil {
		relay.Stop()
		wrk.Stop() // take no new tasks while running ones finish
		wrk.Shutdown()
	}
	a.log.Info("stopped")
	return nil
}

// newHTTPServer serves h with the timeouts every listener of the service
// has: a slow client holds a connection for a bounded time.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
}

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

// localURL is the http URL of a listening address; a wildcard host is
// reached as localhost.
func localURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// opsHandler serves what every non-API role needs: probes, metrics (nil:
// served on a listener of their own), and the dev mailbox of a worker
// without SMTP.
func opsHandler(a *app, metrics, mailbox http.Handler) http.Handler {
	mux := http.NewServeMux()
	health.Register(mux, a.store)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	if a.cfg.PProf {
		mux.Handle("/debug/pprof/", pprofHandler(a.guard))
	}
	if mailbox != nil {
		mux.Handle("GET /dev/mailbox", mailbox)
	}
	return mux
}

// reachedAs is the URL to print for a listening address: NEWSLETTER_BASE_URL
// when it names the same loopback endpoint (embedded mode listens on
// 127.0.0.1:8080 and links to http://localhost:8080), else localURL.
func (a *app) reachedAs(listen string) string {
	own := localURL(listen)
	ou, err1 := url.Parse(own)
	bu, err2 := url.Parse(a.cfg.BaseURL)
	if err1 == nil && err2 == nil && bu.Scheme == "http" && bu.Path == "" && ou.Port() == bu.Port() &&
		config.Loopback(ou.Host) && config.Loopback(bu.Host) {
		return a.cfg.BaseURL
	}
	return own
}

// banner prints, in a few lines, where to look: at the address this
// process listens on, and where mails link to when that differs.
func (a *app) banner(r roles, listen, metricsListen string, devMailbox bool) {
	base := a.reachedAs(listen)
	fmt.Fprintf(a.out, "newsletter %s listening on %s\n", r, listen)
	if base != a.cfg.BaseURL {
		fmt.Fprintf(a.out, "  links in mails   %s   (NEWSLETTER_BASE_URL)\n", a.cfg.BaseURL)
	}
	if r.api {
		fmt.Fprintf(a.out, "  signup form      %s/\n", base)
		fmt.Fprintf(a.out, "  console          %s/admin/   (sign in with an admin, editor or viewer token)\n", base)
	}
	if devMailbox {
		fmt.Fprintf(a.out, "  dev mailbox      %s/dev/mailbox   (no NEWSLETTER_SMTP_URL: mail is kept here, not sent)\n", base)
	}
	switch {
	case r.api && a.tokenGenerated:
		fmt.Fprintf(a.out, "  monitoring       %s/monitoring/   (user admin, password %s)\n", base, a.cfg.AdminToken)
		fmt.Fprintf(a.out, "  admin API        Authorization: Bearer %s\n", a.cfg.AdminToken)
	case r.api && a.cfg.AdminToken != "":
		fmt.Fprintf(a.out, "  monitoring       %s/monitoring/   (user admin, password: NEWSLETTER_ADMIN_TOKEN)\n", base)
	}
	fmt.Fprintf(a.out, "  metrics          %s/metrics\n", a.reachedAs(metricsListen))
	if a.emb != nil {
		fmt.Fprintf(a.out, "  other terminals  export NEWSLETTER_REDIS_URL=%s NEWSLETTER_SECRET=%s\n", a.emb.URL(), a.cfg.Secret)
		fmt.Fprintf(a.out, "  embedded Redis in memory: nothing is durable, nothing survives a restart\n")
	}
}

// webhooks are the providers' webhooks that are configured.
func webhooks(a *app) map[string]feedback.Webhook {
	w := map[string]feedback.Webhook{}
	if len(a.cfg.SESTopicARNs) > 0 {
		w["ses"] = &feedback.SES{TopicARNs: a.cfg.SESTopicARNs, Tags: a.tags, Log: a.log}
	}
	if a.cfg.SendGridPublicKey != "" {
		key, err := feedback.ParseSendGridKey(a.cfg.SendGridPublicKey) // checked by config.Load
		if err == nil {
			w["sendgrid"] = &feedback.SendGrid{Key: key, Tags: a.tags}
		}
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
		BounceAddress: a.cfg.BounceAddress, Domain: a.cfg.SMTPHelo, Tagger: a.tags, Queue: queue,
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
	return worker.Links{BaseURL: a.cfg.BaseURL, Signer: a.signer, Topics: a.cfg.Topics, ListID: listID(a.cfg.From)}
}

// issueRenderer is r as the API's renderer, nil when there is none (not
// a nil pointer in an interface).
func issueRenderer(r *issueMail) api.IssueRenderer {
	if r == nil {
		return nil
	}
	return api.CachePreviews(r)
}
