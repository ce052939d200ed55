package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// SessionTTL is how long a session lasts after sign-in.
const SessionTTL = 12 * time.Hour

// DefaultMaxUpload is the largest CSV the import takes (Config.MaxUpload).
const DefaultMaxUpload = 32 << 20

// Config is the console's behaviour.
type Config struct {
	// BaseURL is the service's public URL (NEWSLETTER_BASE_URL): under
	// https the session cookie is Secure, and its origin is trusted by the
	// cross-origin check.
	BaseURL string
	// Topics are the topics in effect (nil: Deps.Catalog, else the built-in ones).
	Topics topics.Source
	// SessionTTL (default SessionTTL) and MaxUpload (default
	// DefaultMaxUpload) are for tests and odd deployments.
	SessionTTL time.Duration
	MaxUpload  int64
	// ConfirmSendAbove is the audience above which a send asks the
	// publisher to type the number of readers
	// (NEWSLETTER_CONFIRM_SEND_ABOVE; 0: DefaultConfirmSendAbove).
	ConfirmSendAbove int64
	// Endpoints checks the webhook URLs admins register (the API's:
	// https, public addresses unless NEWSLETTER_WEBHOOK_ALLOW_PRIVATE).
	Endpoints netguard.Guard
	// DKIMDomain is NEWSLETTER_DKIM_DOMAIN: a From saved in the settings
	// must align with it.
	DKIMDomain string
}

// DefaultConfirmSendAbove is the audience above which a send asks again.
const DefaultConfirmSendAbove = 1000

// Store is what the console needs of the store.
type Store interface {
	store.Subscribers
	store.Suppressions
	store.Issues
	store.Webhooks
	store.Segments
	AddItem(ctx context.Context, it store.Item) (store.Item, error)
	Item(ctx context.Context, id int64) (store.Item, error)
	UpdateItem(ctx context.Context, it store.Item) (store.Item, error)
	DeleteItem(ctx context.Context, id int64) error
	ItemsAfter(ctx context.Context, topic string, after int64, limit int) ([]store.Item, error)
	SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error)
	OutboxDone(ctx context.Context, ids ...string) error
}

// Guard signs people in with a token and spends a wrong one against the
// failure budget every guarded route shares (*adminauth.Guard).
type Guard interface {
	AuthenticateRequest(r *http.Request, token string) (Principal, error)
	// Failed spends a failed account sign-in from r's client against the
	// same budget (nil while it has failures left, else after a hold a
	// *adminauth.TooManyError).
	Failed(r *http.Request) *adminauth.TooManyError
	// Blocked tells, counting nothing, that r's client is over the
	// budget: asked before a password is hashed.
	Blocked(r *http.Request) *adminauth.TooManyError
	// Client names r's client as the budget does.
	Client(r *http.Request) string
}

// TokenStore finds stored tokens by their hash (store.Redis): each
// request of a session looks its token up, so a revocation ends the
// session at once.
type TokenStore interface {
	LookupToken(ctx context.Context, hash string) (Principal, error)
}

// TokenAdmin manages the stored tokens (store.Redis; the Tokens screen).
type TokenAdmin interface {
	adminauth.TokenMaker
	ListTokens(ctx context.Context) ([]adminauth.StoredToken, error)
	RevokeToken(ctx context.Context, name string) error
}

// Trail records the console's changes in the audit log (*audit.Trail:
// a failed write is logged whole and counted) and names a subscriber
// there by a keyed hash, never the address.
type Trail interface {
	Note(ctx context.Context, e audit.Entry) error
	Subscriber(address string) string
}

// QueueInspector reads the queues' health (*asynq.Inspector).
type QueueInspector interface {
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// Deps are the console's collaborators.
type Deps struct {
	// Redis keeps the sessions, and the imports' files and progress.
	Redis    redis.UniversalClient
	Store    Store
	Renderer issues.Renderer
	// Issues makes the moves of issues: the API's, so a move is the same
	// from both (nil: made here by issues.New from Store, Jobs, Settings
	// and Renderer).
	Issues *issues.Service
	// Checker runs the pre-send checks the issue page shows (the API's;
	// nil: made here from Renderer and Settings, checking no link).
	Checker *issues.Checker
	// Subscriptions change topics and end subscriptions
	// (*subscribers.Service, the API's).
	Subscriptions Subscriptions
	// People list people and read one's data and the overview's
	// figures (nil: only find by address, no counts).
	People People
	// Requests export and erase people (nil: both answer 501).
	Requests PersonalRequests
	// List adds and changes people, runs bulk actions and exports (nil:
	// those screens answer 501).
	List ListOwner
	Jobs tasks.JobDispatcher
	// Queue enqueues the imports (run by the worker).
	Queue tasks.Enqueuer
	// Webhooks registers and tests the outgoing webhook endpoints, as
	// the API does.
	Webhooks *webhooks.Service
	Guard    Guard
	// EnvToken is NEWSLETTER_ADMIN_TOKEN: its sessions last while it is
	// the configured one.
	EnvToken string
	Tokens   TokenStore // nil: only EnvToken signs in
	// Accounts are the people who sign in with an address, a password
	// and a TOTP code (store.Redis; nil: tokens only, no account pages).
	Accounts store.Accounts
	// Hold waits before a failed account sign-in is answered, longer the
	// more the account failed in a row (time.Sleep; tests record it).
	Hold func(time.Duration)
	// Passwords hashes and checks passwords, a few at a time
	// (account.Passwords, the process's one; tests give their own).
	Passwords  *accounts.Hasher
	TokenAdmin TokenAdmin // nil: the Tokens screen only says how
	Audit      Trail
	AuditLog   audit.Reader   // the Audit log screen (store.Redis)
	Queues     QueueInspector // nil: no queue health on the overview
	// Engagement gives an issue's clicks and opens for its report on the
	// issue page (nil: none counted, the report shows no clicks).
	Engagement store.EngagementReader
	// TestGate decides who a test send may reach (the API's, so both
	// share one allowance; nil: only the account's own address).
	TestGate *issues.TestGate
	// Settings are the newsletter's (the API's cache, so a save here is
	// in effect there at once; nil: the Settings screen answers 501 and
	// sends need no postal address).
	Settings      *settings.Cache
	SettingsStore store.SettingsStore
	Log           *slog.Logger
	Now           func() time.Time

	// Catalog is the topics, the sequence and the mail templates in
	// effect (the API's, so a save here is in effect there at once), and
	// Templates the built-in templates' text (nil: the Topics, Sequence
	// and Mail templates screens answer 501).
	Catalog   *catalog.Live
	Templates catalog.BuiltinTemplates
}

// Handler serves /admin/.
type Handler struct {
	cfg      Config
	d        Deps
	mux      *http.ServeMux
	csrf     *http.CrossOriginProtection
	sessions *sessions
	imports  *csvimport.Jobs
	issues   *issues.Service
	checker  *issues.Checker // the pre-send checks (issue_checks.go)
	secure   bool
}

// New builds the console. A BaseURL that does not parse is an error.
func New(cfg Config, d Deps) (*Handler, error) {
	if topics.Missing(cfg.Topics) && d.Catalog != nil {
		cfg.Topics = d.Catalog
	}
	if topics.Missing(cfg.Topics) {
		cfg.Topics = topics.Default(0)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = SessionTTL
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Passwords == nil {
		d.Passwords = accounts.Passwords
	}
	if d.Hold == nil {
		d.Hold = time.Sleep
	}
	if d.TestGate == nil {
		d.TestGate = &issues.TestGate{Now: d.Now}
	}
	if cfg.ConfirmSendAbove <= 0 {
		cfg.ConfirmSendAbove = DefaultConfirmSendAbove
	}
	if d.Redis == nil || d.Store == nil || d.Guard == nil || d.Audit == nil || d.AuditLog == nil || d.Subscriptions == nil {
		return nil, errors.New("console: Redis, Store, Subscriptions, Guard, Audit and AuditLog are needed")
	}
	h := &Handler{cfg: cfg, d: d, mux: http.NewServeMux(), csrf: http.NewCrossOriginProtection()}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || u.Host == "" {
			return nil, errors.New("console: the base URL is not an absolute URL")
		}
		h.secure = u.Scheme == "https"
		if err := h.csrf.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, err
		}
	}
	h.csrf.SetDenyHandler(http.HandlerFunc(h.crossOrigin))
	h.sessions = &sessions{rdb: d.Redis, ttl: cfg.SessionTTL, now: d.Now}
	h.imports = csvimport.NewJobs(d.Redis)
	h.checker = d.Checker
	if h.checker == nil {
		h.checker = ownChecker(d)
	}
	h.issues = d.Issues
	if h.issues == nil {
		h.issues = issues.New(issues.Parts{Store: d.Store, Jobs: d.Jobs, Log: d.Log, Now: d.Now, BulkReady: d.Settings.BulkReady, Sizer: d.Renderer,
			Checker: h.checker})
	}
	h.routes()
	return h, nil
}

// ServeHTTP implements http.Handler: every request passes the
// cross-origin check first (safe methods always do).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Cache-Control", "no-store")
	h.csrf.Handler(h.mux).ServeHTTP(w, r)
}

// pageCSP lets the console's pages load only its own script and style;
// a preview of a mail is framed as srcdoc in a sandbox without scripts,
// and its images may come from anywhere the mail names.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: https: http:; " +
	"connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// crossOrigin answers a form posted from another site.
func (h *Handler) crossOrigin(w http.ResponseWriter, r *http.Request) {
	h.errorPage(w, r, http.StatusForbidden, "Refused", "This form was sent from another site. Nothing was changed. Open the console and try again there.")
}

// record writes one audit entry for the person signed in on r.
func (h *Handler) record(r *http.Request, action, target, detail string) {
	h.audit(r.Context(), principalOf(r), action, target, detail)
}

// audit writes one audit entry for p; a failure is logged and counted by
// the Trail (the change itself is done and cannot be taken back).
func (h *Handler) audit(ctx context.Context, p Principal, action, target, detail string) {
	_ = h.d.Audit.Note(ctx, audit.Entry{At: h.d.Now(), Actor: p.Name, Role: string(p.Role), Action: action, Target: target, Detail: detail})
}

// person is how the audit log names a subscriber: the keyed hash of the
// address (as the API's entries and the logs), never the address.
func (h *Handler) person(sub store.Subscriber) string { return h.d.Audit.Subscriber(sub.Email) }

// The console's own audit actions (the rest are internal/audit's).
const (
	actionSignedIn  = "console.signed_in"
	actionSignedOut = "console.signed_out"
)
