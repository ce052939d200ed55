package main

import (
	"fmt"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/subscribers"
	"github.com/newsletter/newsletter/services/webhooks"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// consoleDeps are the API role's parts the console shares: its store,
// dispatcher and client (so a console action is the API's), the queue
// inspector, the issue renderer (nil without mail templates), the
// issues.Service and the subscribers.Service.
type consoleDeps struct {
	store  *store.Redis
	jobs   tasks.JobDispatcher
	queue  tasks.Enqueuer
	insp   *asynq.Inspector
	render issues.Renderer
	// steps previews and test-sends sequence steps (nil: no mail
	// templates in this process).
	steps  console.StepMail
	issues *issues.Service
	// checker runs the pre-send checks the issue page shows (the API's).
	checker *issues.Checker
	subs    *subscribers.Service
	hooks   *webhooks.Service
	// redis keeps the sessions and the imports' progress (a plain
	// connection: their writes are transactions).
	redis redis.UniversalClient
	// media keeps the images the issue editor uploads (the API's).
	media *media.Service
}

// mountConsole serves the publisher's console at /admin/ on srv. It
// signs in with the same guard as /api/ (NEWSLETTER_ADMIN_TOKEN and the
// stored tokens, one failure budget) and writes the same audit log; its
// changes of the list, export and erase are the API's (d.subs).
func mountConsole(a *app, srv *api.Server, d consoleDeps) error {
	h, err := console.New(console.Config{BaseURL: a.cfg.BaseURL, Topics: a.catalog, ConfirmSendAbove: a.cfg.ConfirmSendAbove, Endpoints: a.cfg.Endpoints(), DKIMDomain: a.cfg.DKIMDomain}, console.Deps{
		Redis: d.redis, Store: d.store, Renderer: d.render, Steps: d.steps, Issues: d.issues, Checker: d.checker, Media: d.media, Jobs: d.jobs, Queue: d.queue, Webhooks: d.hooks,
		Subscriptions: d.subs, People: d.store, Requests: d.subs, List: d.subs,
		Guard: a.guard, EnvToken: a.cfg.AdminToken, Tokens: d.store, TokenAdmin: d.store, Accounts: d.store,
		Audit: a.audit, AuditLog: d.store,
		Queues: d.insp, Log: a.log, TestGate: a.cfg.TestGate,
		Engagement: d.store,
		Settings:   a.settings, SettingsStore: d.store,
		Catalog: a.catalog, Templates: catalogmail.Builtins{},
	})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	srv.Handle("/admin/", h)
	return nil
}

// listService is the binary's one subscribers.Service, over the API's
// store, dispatcher, client and inspector: the API and the console change
// the list through it. notify is the API's own notifier, whose cache of
// endpoints the API's webhook routes reset.
func listService(a *app, st *store.Redis, jobs tasks.JobDispatcher, q tasks.Enqueuer, insp *asynq.Inspector, notify *webhooks.Notifier) *subscribers.Service {
	return &subscribers.Service{Store: st, Topics: a.catalog, Jobs: jobs, Queue: q, Tasks: insp, Notify: notify,
		Audit: a.audit, ListJobs: listjobs.NewJobs(a.rdb), Channels: personData(a), Log: a.log}
}
