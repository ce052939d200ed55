package api

import (
	"context"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/health"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/internal/ratelimit"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/services/subscribers"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TaskDeleter removes a waiting task (*asynq.Inspector).
type TaskDeleter interface {
	DeleteTask(queue, id string) error
}

// The values of NEWSLETTER_UNSUBSCRIBE_BY_EMAIL.
const (
	// UnsubscribeImmediate ends the subscription of the typed address at
	// once (the welcome-window flow relies on it).
	UnsubscribeImmediate = "immediate"
	// UnsubscribeConfirm mails a one-click link to the typed address
	// instead: only its owner can use it. Recommended in public.
	UnsubscribeConfirm = "confirm"
)

// ConfirmationsPerDay is how many confirmations one pending address gets
// in a day, however far apart (with the cooldown of
// NEWSLETTER_CONFIRM_COOLDOWN between them).
const ConfirmationsPerDay = 3

// Config is the API's behaviour.
type Config struct {
	DoubleOptIn bool
	// WelcomeDelay is the first step's delay of the built-in sequence,
	// used when Topics is nil.
	WelcomeDelay time.Duration
	// Topics are the topics and the onboarding sequence (nil: the
	// built-in ones).
	Topics topics.Source
	// AdminToken guards /api/*; empty closes those routes (404).
	AdminToken string
	// SubscribeRate is requests per minute per client address; 0 is off.
	SubscribeRate int
	// Clients names a request's client for the limits (trusted proxies).
	Clients clientip.Resolver
	// ConfirmHold limits the confirmations one mailbox gets
	// (NEWSLETTER_CONFIRM_COOLDOWN, and ConfirmationsPerDay), and the
	// unsubscribe links mailed on request alike.
	ConfirmHold store.ConfirmHold
	// Origin is the service's public origin (NEWSLETTER_BASE_URL): the
	// forms' same-origin checks accept it.
	Origin string
	// UnsubscribeByEmail is what an unsubscribe by address alone does:
	// UnsubscribeImmediate (the default) or UnsubscribeConfirm.
	UnsubscribeByEmail string
	// ReadTrackers are the added channels that know whether a reader
	// read a message (channels.ReadTracker: the inbox): an event may hold
	// its e-mail until unread there ("email_if_unread_after").
	ReadTrackers []string
	// RequestTimeout bounds each request's work (NEWSLETTER_REQUEST_TIMEOUT;
	// 0: none): a hung Redis makes a 503 in time, not a hung page.
	RequestTimeout time.Duration
	// MaxBody is the largest request body (default 16 KiB).
	MaxBody int64
	// VAPIDPublicKey is the web push key the pages give browsers
	// (base64url); empty: web push off, no routes, no offer.
	VAPIDPublicKey string
	// AppPush tells that FCM or APNs is configured: with it or web push
	// the preference centre offers the Notifications channel (a person
	// cannot be reached by push on a service that sends none).
	AppPush bool
	// Endpoints checks the push endpoints browsers hand in and the
	// webhook endpoints admins register (https, public addresses unless
	// NEWSLETTER_WEBHOOK_ALLOW_PRIVATE); the zero Guard wants both.
	Endpoints netguard.Guard
	// Publisher names the archive's feed (its title and author; default
	// "Newsletter").
	Publisher string
	// ArchiveRecheck is how often the archive's cache looks for newly
	// sent issues (default DefaultArchiveRecheck).
	ArchiveRecheck time.Duration
	// SMSAuthToken is NEWSLETTER_SMS_AUTH_TOKEN; empty: SMS off. The
	// gateway's signed callbacks are the SMS channel's handler
	// (sms.CallbackHandler), which the binary mounts beside the API.
	// SMSMaxSegments caps an event's text (its title and link), checked
	// when the event is posted.
	SMSAuthToken   string
	SMSMaxSegments int
	// SMSCountries are the countries whose numbers may be given
	// (NEWSLETTER_SMS_COUNTRIES; none: any). SMSCodesPerClient caps the
	// codes one client address may have texted in an hour
	// (NEWSLETTER_SMS_CODES_PER_CLIENT, whose default the binary gives;
	// less than 1: 1).
	SMSCountries      phone.Countries
	SMSCodesPerClient int
	// DKIMDomain is NEWSLETTER_DKIM_DOMAIN: a From saved in the settings
	// must align with it ("" : any From).
	DKIMDomain string
}

// Store is what the API needs of the store: the subscriber list, digest
// items and the digest runs' progress.
type Store interface {
	store.Subscribers
	store.Suppressions
	store.MailHolds
	store.Webhooks
	store.People
	store.List
	AddItem(ctx context.Context, it store.Item) (store.Item, error)
	Item(ctx context.Context, id int64) (store.Item, error)
	UpdateItem(ctx context.Context, it store.Item) (store.Item, error)
	DeleteItem(ctx context.Context, id int64) error
	DigestRun(ctx context.Context, period string) (store.DigestRun, error)
	AddPushSubscription(ctx context.Context, id int64, p store.PushSubscription) error
	store.Devices
	store.Phones
	store.ChannelChoices
	store.Tags
	store.Fields
	store.Segments
	store.EventKeys
}

// Deps are the API's collaborators.
type Deps struct {
	Store Store
	// Jobs enqueues (a *tasks.Dispatcher).
	Jobs tasks.JobDispatcher
	// Queue enqueues events and digest plans (*asynq.Client): tasks without
	// an outbox entry, which a caller can simply repeat.
	Queue   tasks.Enqueuer
	Tasks   TaskDeleter
	Signer  *token.Signer
	Log     *slog.Logger
	Metrics *Metrics
	// Guard checks the tokens and roles (nil: one for Config.AdminToken
	// and the stored Tokens); the binary shares one with its other guarded
	// routes, so failed attempts count together.
	Guard *adminauth.Guard
	// Tokens are the stored tokens a Guard made here accepts (nil: only
	// Config.AdminToken).
	Tokens adminauth.TokenStore
	// Webhooks registers and tests the outgoing webhook endpoints, as
	// the console does (nil: no /api/webhooks routes).
	Webhooks *webhooks.Service
	// Notify queues the webhook events of the changes the API makes
	// (confirmed, unsubscribed); nil queues none.
	Notify *webhooks.Notifier
	// Metrics handler for GET /metrics; nil leaves the route out.
	MetricsHandler http.Handler
	Now            func() time.Time
	// Issues and IssueRenderer serve /api/issues (nil: no such routes).
	Issues        IssueStore
	IssueRenderer issues.Renderer
	// IssueService makes the moves of issues: the binary's one, shared
	// with the console and made by issues.New (nil: made here by
	// issues.New from Issues, Jobs, Settings and IssueRenderer).
	IssueService *issues.Service
	// IssueChecker runs an issue's pre-send checks for GET
	// /api/issues/{id}/checks: the binary's one, with its link checker,
	// shared with the console and IssueService (nil: made here from
	// IssueRenderer and Settings, checking no link).
	IssueChecker *issues.Checker
	// Media keeps the images uploaded into issues (nil: no upload
	// route); when it stores into a local folder, GET /media/{name}
	// serves them.
	Media *media.Service
	// Engagement gives an issue's clicks and opens for its report (nil:
	// none counted, the report's engagement is zero).
	Engagement store.EngagementReader
	// TestGate decides who a test send may reach (nil: nobody but the
	// account named by its own address).
	TestGate *issues.TestGate
	// Audit records the changes made through the API (nil: none, for unit
	// tests of other things); AuditLog serves GET /api/audit (nil: no
	// such route).
	Audit    *audit.Trail
	AuditLog audit.Reader
	// Archive and Markdown serve /archive (nil: no such routes).
	Archive  ArchiveStore
	Markdown MarkdownRenderer
	// Imports serve GET /api/imports/{id} (nil: no such route).
	Imports ImportStatuses
	// Accounts serve /api/accounts (the console's accounts; nil: no such
	// routes). An invite's mail is queued on Queue.
	Accounts AccountStore
	// ListJobs keep the list's bulk actions and exports (nil: bulk
	// actions on a filter and exports answer 503).
	ListJobs *listjobs.Jobs
	// Settings are the newsletter's settings in effect (nil: the
	// defaults of Config.Publisher, no postal address required);
	// SettingsStore serves GET/PUT /api/settings (nil: no such routes).
	Settings      *settings.Cache
	SettingsStore store.SettingsStore
	// Catalog serves /api/topics, /api/sequence and /api/templates, and
	// Templates the built-in templates' text (nil: no such routes).
	// Config.Topics is the same catalog where there is one.
	Catalog   *catalog.Live
	Templates catalog.BuiltinTemplates
	// Subscribers make the list's changes (adding, changing, bulk
	// actions, exports, topics, ending, erasing): the binary's one,
	// shared with the console (nil: made here from Store, Config.Topics,
	// Jobs, Queue, Tasks, Notify, Audit, ListJobs).
	Subscribers *subscribers.Service
	// Checks are the channels' rules for what a client hands in, and
	// the SMS channel's counter of codes refused.
	Checks ChannelChecks
	// Acker, when set, holds every answer under 400 to a change until
	// the replicas have it (NEWSLETTER_REDIS_ACK_REPLICAS; acked.go);
	// nil: answers go out once the primary has the change.
	Acker Acker
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	deps    Deps
	limiter *ratelimit.Limiter // signups per client
	leaving *ratelimit.Limiter // unsubscribes by address per client
	texting *ratelimit.Limiter // texted codes per client
	mux     *routeMux
	archive *archiveCache
	issues  *issues.Service // nil: no issue routes
	checker *issues.Checker // the pre-send checks (issue_checks.go)
	subs    *subscribers.Service
	openapi openAPIDoc // GET /api/openapi.json's bytes, built once
}

// New builds the API. Extra routes (asynqmon, the dev mailbox, admin digest
// routes) are mounted with Handle.
func New(cfg Config, d Deps) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 16 << 10
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if topics.Missing(cfg.Topics) && d.Catalog != nil {
		cfg.Topics = d.Catalog
	}
	if topics.Missing(cfg.Topics) {
		cfg.Topics = topics.Default(cfg.WelcomeDelay)
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.TestGate == nil {
		d.TestGate = &issues.TestGate{Now: d.Now}
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil)
	}
	if d.Checks.SMSCodeCapped == nil {
		d.Checks.SMSCodeCapped = func() {}
	}
	if cfg.Publisher == "" {
		cfg.Publisher = "Newsletter"
	}
	if d.Settings == nil {
		d.Settings = settings.Fixed(store.Settings{Name: cfg.Publisher})
	}
	if d.Guard == nil {
		d.Guard = adminauth.New(cfg.AdminToken, cfg.Clients.Key, d.Now)
		if d.Tokens != nil {
			d.Guard.WithTokens(d.Tokens)
		}
	}
	s := &Server{cfg: cfg, deps: d, mux: newRouteMux(), subs: d.Subscribers}
	if s.subs == nil {
		s.subs = &subscribers.Service{Store: d.Store, Topics: cfg.Topics, Jobs: d.Jobs, Queue: d.Queue, Tasks: d.Tasks,
			Notify: d.Notify, Audit: d.Audit, ListJobs: d.ListJobs, Log: d.Log, Now: d.Now}
	}
	if cfg.SubscribeRate > 0 {
		s.limiter = ratelimit.New(cfg.SubscribeRate, time.Minute, d.Now)
		s.leaving = ratelimit.New(cfg.SubscribeRate, time.Minute, d.Now)
	}
	s.texting = ratelimit.New(max(cfg.SMSCodesPerClient, 1), time.Hour, d.Now)
	s.routes()
	return s
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /{$}", s.form)
	m.HandleFunc("GET /favicon.ico", noIcon)
	m.HandleFunc("POST /subscribe", s.subscribe)
	m.HandleFunc("GET /confirm", tokenPage(s.confirmPage))
	m.HandleFunc("POST /confirm", tokenPage(s.confirm))
	m.HandleFunc("GET /unsubscribe", tokenPage(s.unsubscribePage))
	m.HandleFunc("POST /unsubscribe", tokenPage(s.unsubscribe))
	m.HandleFunc("GET /preferences", tokenPage(s.preferencesPage))
	m.HandleFunc("POST /preferences", tokenPage(s.preferences))
	m.HandleFunc("POST /resubscribe", tokenPage(s.resubscribe))
	m.HandleFunc("POST /preferences/fresh", tokenPage(s.freshPreferences))
	health.Register(m, s.deps.Store)
	if s.deps.MetricsHandler != nil {
		m.Handle("GET /metrics", s.deps.MetricsHandler)
	}
	m.Handle("GET /api/subscribers/{email}", s.Viewer(http.HandlerFunc(s.getSubscriber)))
	s.adminRoutes()
	s.issueRoutes()
	s.mediaRoutes()
	s.archiveRoutes()
	s.feedbackRoutes()
	s.pushRoutes()
	s.deviceRoutes()
	s.phoneRoutes()
	s.phoneCodeRoutes()
	s.webhookRoutes()
	s.auditRoutes()
	s.peopleRoutes()
	s.listRoutes()
	s.importRoutes()
	s.accountRoutes()
	s.segmentRoutes()
	s.settingsRoutes()
	s.catalogRoutes()
	s.openAPIRoutes()
}

// noIcon answers the browsers' favicon request with no content: a 404
// there is an error in every page's console.
func noIcon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.WriteHeader(http.StatusNoContent)
}

// Handle mounts h at pattern (a Go 1.22 ServeMux pattern).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleUntimed mounts h at pattern without the request timeout every
// other route has (RequestTimeout): h holds long-lived responses
// (server-sent events) and bounds its own time.
func (s *Server) HandleUntimed(pattern string, h http.Handler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if base, ok := r.Context().Value(untimedKey{}).(context.Context); ok {
			r = r.WithContext(base)
		}
		h.ServeHTTP(w, r)
	}))
}

// untimedKey holds, in a request's context, the context before the
// request timeout (HandleUntimed).
type untimedKey struct{}

// ServeHTTP implements http.Handler, counting every request by route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if s.cfg.RequestTimeout > 0 {
		base := r.Context()
		ctx, cancel := context.WithTimeout(context.WithValue(base, untimedKey{}, base), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if s.https() {
		w.Header().Set("Strict-Transport-Security", hstsMaxAge)
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK, newsletter: func() store.Settings { return s.deps.Settings.Current(r.Context()) }}
	gated, done := s.ackGate(rec, r)
	s.mux.ServeHTTP(gated, r)
	done()
	// ServeMux sets r.Pattern in place: the route's pattern, never the
	// raw path, so tokens and addresses in URLs cannot blow up cardinality.
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	s.deps.Metrics.observe(route, rec.code, time.Since(start))
}

func (s *Server) form(w http.ResponseWriter, r *http.Request) {
	renderPage(w, http.StatusOK, "form", pageData{Title: "Subscribe", Topics: s.signupChoices(s.cfg.Topics.Current().SignupDefaults()), Newsletter: s.newsletter(r)})
}

// wantsJSON tells API clients from browsers: a JSON body, or an Accept
// header that prefers JSON.
func wantsJSON(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return ct == "application/json" || strings.HasPrefix(r.Header.Get("Accept"), "application/json")
}

func errorBody(msg string) map[string]string { return map[string]string{"error": msg} }

// fail answers an error as JSON or as a page.
func fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if wantsJSON(r) {
		webjson.Write(w, code, errorBody(msg))
		return
	}
	message(w, code, http.StatusText(code), msg)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
	// newsletter are the settings in effect: every page's title and
	// heading name the newsletter, and the pages are rendered by
	// renderPage, which has the writer and not the server.
	newsletter func() store.Settings
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

// recorderOf finds the statusRecorder under w's wrappers (the ackWriter's),
// nil when there is none.
func recorderOf(w http.ResponseWriter) *statusRecorder {
	for {
		switch v := w.(type) {
		case *statusRecorder:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
