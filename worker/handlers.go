package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/feeds"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Store is every part of the store the worker's components use together.
type Store interface {
	DeliveryStore
	PlanStore
	DigestIssueStore
	RecentDigests
	IssueStore
	store.Issues
	store.Suppressions
	store.MailHolds
	store.Feeds
	store.Webhooks
	store.PushSubscriptions
	store.Devices
	store.Phones
	store.PersonOrder
	store.ChannelChoices
	TakeSMSAllowance(ctx context.Context, number, day string, perNumber, perDay int) (string, error)
	GiveSMSAllowance(ctx context.Context, number, day string) error
	GetByID(ctx context.Context, id int64) (store.Subscriber, error)
	EventEngagement(ctx context.Context, eventID string) (int64, error)
}

// Deps is what the components are built from: the one place where a
// worker is wired (the commands and the tests use it).
type Deps struct {
	// BulkReady, when set, holds the cron's digest until it allows bulk
	// mail (settings.Cache.BulkReady: a postal address saved).
	BulkReady func(ctx context.Context) error
	Store     Store
	Mailer    mailer.Mailer
	Render    *mailer.Renderer
	Links     Links
	Queue     tasks.Enqueuer
	Depth     QueueDepth // nil: no back pressure
	Pace      Pacer      // nil: no pacing
	// ConfirmPace: confirmations' own rate (nil: none).
	ConfirmPace Pacer
	Quiet       *quiet.Hours // nil: no quiet hours
	Metrics     *Metrics
	Log         *slog.Logger
	Now         func() time.Time // nil: time.Now

	// MarkWindow is how many mails may be sent and not yet marked at
	// once, all senders together: what a killed worker may send twice.
	// Set it to the worker's concurrency (the bound of one mark per
	// sender); 0 marks every mail in a round trip of its own.
	MarkWindow int

	// Tags traces mail to its subscriber in late bounces (nil: no tag).
	Tags *feedback.Tagger
	// Feedback is how bounce reports add up (the store's defaults).
	Feedback store.FeedbackPolicy
	// Feeds fetches the topics file's feeds (nil: the defaults, which
	// refuse private addresses); Links.Topics names them.
	Feeds *feeds.Fetcher

	// DefaultZone is the time zone of readers without one when an issue
	// goes out at a local hour (nil: UTC).
	DefaultZone *time.Location

	ClaimTTL          time.Duration // DefaultClaimTTL
	RedisWait         time.Duration // redisconn.DefaultWait
	Throttle          time.Duration // DefaultThrottle
	DigestBatch       int           // DefaultDigestBatch
	MaxPendingBatches int           // DefaultMaxPendingBatches

	// Notify queues the webhook events of what the handlers change (a
	// bounce, a complaint, an issue sent); nil queues none.
	Notify *webhooks.Notifier
	// WebhookPost delivers webhook events (nil: a webhook.Sender that
	// refuses private addresses); WebhookPolicy disables an endpoint that
	// keeps failing; WebhookBackoff is the retry schedule (zero: the
	// default, a day).
	WebhookPost    WebhookPoster
	WebhookPolicy  store.WebhookPolicy
	WebhookBackoff tasks.WebhookBackoff

	// Push sends web push notifications (nil: no push lane handler, web
	// push is off); PushRetry is the push lane's backoff.
	Push webpush.Sender
	// Apps send to app installs by platform (FCM, APNs; nil or empty:
	// none), in the push lane.
	Apps      map[string]*AppGate
	Services  *ServiceGates
	PushRetry RetryPolicy

	// SMS texts through the gateway (nil: no sms lane handler, SMS is
	// off); SMSLimits are its caps, SMSRetry the lane's backoff.
	SMS       sms.Gateway
	SMSLimits SMSLimits
	SMSRetry  RetryPolicy

	// Channels are the channels added through the seam (channels.Plugin),
	// each run by the generic lane (ChannelLane) in a lane of its name;
	// ChannelRetry is their lanes' backoff.
	Channels     []channels.Channel
	ChannelRetry RetryPolicy

	// Imports are the console's uploaded imports, ImportStore where they
	// write (either nil: this worker runs none); Audit records their ends.
	Imports     *csvimport.Jobs
	ImportStore csvimport.Store
	Audit       Auditor
	// ListJobs are the list's bulk actions and exports, ListStore what
	// they read and change, ListTasks deletes the queued tasks of people
	// they unsubscribe or erase (any of the first two nil: this worker
	// runs none).
	ListJobs  *listjobs.Jobs
	ListStore ListStore
	ListTasks listjobs.TaskDeleter
}

// ListStore is what the list's jobs need of the store.
type ListStore interface {
	listjobs.Selection
	listjobs.ActionStore
}

// The sms lane's caps unless configured.
const (
	DefaultSMSMaxSegments  = 2
	DefaultSMSPerNumberDay = 5
	DefaultSMSPerDay       = 10000
)

// SMSLimits are the sms lane's caps (NEWSLETTER_SMS_MAX_SEGMENTS,
// _PER_NUMBER_DAY, _PER_DAY); zero values take the defaults.
type SMSLimits struct {
	MaxSegments, PerNumberDay, PerDay int
}

// withDefaults is d with every setting left zero given its default: the
// one place the components' defaults are set, so no component checks for
// a missing clock, log or limit when it runs.
func (d Deps) withDefaults() Deps {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil) // counted, not exported
	}
	if topics.Missing(d.Links.Topics) {
		d.Links.Topics = topics.Default(0)
	}
	if d.DefaultZone == nil {
		d.DefaultZone = time.UTC
	}
	// Zero or less is unset: none of these can be used as a bound.
	d.ClaimTTL = positiveOr(d.ClaimTTL, DefaultClaimTTL)
	d.RedisWait = positiveOr(d.RedisWait, redisconn.DefaultWait)
	d.Throttle = positiveOr(d.Throttle, DefaultThrottle)
	d.DigestBatch = positiveOr(d.DigestBatch, DefaultDigestBatch)
	d.MaxPendingBatches = positiveOr(d.MaxPendingBatches, DefaultMaxPendingBatches)
	d.SMSLimits.MaxSegments = positiveOr(d.SMSLimits.MaxSegments, DefaultSMSMaxSegments)
	d.SMSLimits.PerNumberDay = positiveOr(d.SMSLimits.PerNumberDay, DefaultSMSPerNumberDay)
	d.SMSLimits.PerDay = positiveOr(d.SMSLimits.PerDay, DefaultSMSPerDay)
	if d.Feeds == nil {
		d.Feeds = &feeds.Fetcher{UserAgent: feeds.DefaultUserAgent}
	}
	if d.WebhookPost == nil {
		d.WebhookPost = webhook.NewSender(netguard.Guard{})
	}
	if d.WebhookBackoff == (tasks.WebhookBackoff{}) {
		d.WebhookBackoff = tasks.DefaultWebhookBackoff
	}
	return d
}

// positiveOr is v when it is above zero, else def.
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// NewHandlers builds every component from d, with d's defaults.
func NewHandlers(d Deps) Handlers {
	d = d.withDefaults()
	// One recorder for every bounce and complaint: the reports' tasks and
	// the receivers' answers at sending.
	recorder := &FeedbackRecorder{Store: d.Store, Policy: d.Feedback, Metrics: d.Metrics, Log: d.Log, Notify: d.Notify}
	deliver := &Deliverer{
		Store: d.Store, Mailer: d.Mailer, Render: d.Render, Pace: d.Pace, ConfirmPace: d.ConfirmPace,
		Throttle: d.Throttle, ClaimTTL: d.ClaimTTL, Metrics: d.Metrics, Log: d.Log, Tags: d.Tags,
		Notify: d.Notify, Feedback: recorder,
	}
	wait := redisconn.Wait{For: d.RedisWait, Log: d.Log}
	if d.MarkWindow > 0 {
		deliver.marks = newMarkWriter(d.Store, d.MarkWindow, markLinger, wait)
	}
	var pushes *PushSender // nil: neither web push nor an app platform is on, the push lane runs nothing
	if d.Push != nil || len(d.Apps) > 0 {
		pushes = &PushSender{Store: d.Store, Push: d.Push, Apps: d.Apps, Services: d.Services, Retry: d.PushRetry, ClaimTTL: d.ClaimTTL, Metrics: d.Metrics, Log: d.Log}
	}
	var texts *SMSSender // nil: SMS is off, the sms lane runs nothing
	if d.SMS != nil {
		texts = &SMSSender{Store: d.Store, Channel: sms.Channel{Gateway: d.SMS}, MaxSegments: d.SMSLimits.MaxSegments,
			PerNumberDay: d.SMSLimits.PerNumberDay, PerDay: d.SMSLimits.PerDay, Quiet: d.Quiet,
			Retry: d.SMSRetry, ClaimTTL: d.ClaimTTL, Now: d.Now, Metrics: d.Metrics, Log: d.Log}
	}
	lanes, added, trackers := addedLanes(d)
	var imports *ImportRunner
	if d.Imports != nil && d.ImportStore != nil {
		imports = &ImportRunner{Jobs: d.Imports, Store: d.ImportStore, Queue: d.Queue, Topics: d.Links.Topics, Audit: d.Audit, Now: d.Now, Log: d.Log}
	}
	var listJobs *ListJobRunner
	if d.ListJobs != nil && d.ListStore != nil {
		listJobs = &ListJobRunner{Runner: &listjobs.Runner{Jobs: d.ListJobs, Store: d.ListStore, Audit: d.Audit, Now: d.Now, Log: d.Log,
			Applier: &listjobs.Applier{Store: d.ListStore, Topics: d.Links.Topics, Tasks: d.ListTasks, Channels: channelErasers(d.Channels)}}}
	}
	return Handlers{
		Invites:  &InviteMailer{Mailer: d.Mailer, Render: d.Render, Newsletter: d.Links.Newsletter, Tags: d.Tags, Now: d.Now, Log: d.Log},
		ListJobs: listJobs,
		Mails:    &Mails{Deliver: deliver, Links: d.Links, Holds: d.Store},
		Sequence: &SequenceSender{
			Deliver: deliver, Links: d.Links, Queue: d.Queue, Quiet: d.Quiet, Metrics: d.Metrics, Now: d.Now,
			Digests: d.Store,
		},
		Planner: &Planner{
			Store: d.Store, Issues: d.Store, Render: d.Render, Now: d.Now,
			Queue: d.Queue, Log: d.Log, BulkReady: d.BulkReady,
		},
		Issues: &IssueSender{
			Store: d.Store, Deliver: deliver, Queue: d.Queue, Depth: d.Depth, Links: d.Links, Quiet: d.Quiet,
			Now: d.Now, Log: d.Log, Metrics: d.Metrics, DefaultZone: d.DefaultZone,
			BatchSize: d.DigestBatch, MaxPendingBatches: d.MaxPendingBatches, Notify: d.Notify,
			CheckInterval: DefaultIssueCheckInterval,
		},
		Events:   &EventSender{Deliver: deliver, Links: d.Links, Quiet: d.Quiet, Now: d.Now, Store: d.Store},
		Feedback: recorder,
		Feeds: &FeedPoller{Store: d.Store, Topics: d.Links.Topics, Fetcher: d.Feeds, Render: d.Render, Queue: d.Queue,
			Now: d.Now, Metrics: d.Metrics, Log: d.Log, BulkReady: d.BulkReady},
		Webhooks: &WebhookSender{
			Store: d.Store, Post: d.WebhookPost, Policy: d.WebhookPolicy, Backoff: d.WebhookBackoff,
			Metrics: d.Metrics, Log: d.Log, Now: d.Now,
		},
		Fanout: &FanoutSender{
			Store: d.Store, Deliver: deliver, Queue: d.Queue, Links: d.Links, Quiet: d.Quiet,
			MailBatch: d.DigestBatch, Page: DefaultFanoutPage, Now: d.Now, Log: d.Log, Added: added, Trackers: trackers,
		},
		Push:      pushes,
		SMS:       texts,
		Channels:  lanes,
		Imports:   imports,
		Metrics:   d.Metrics,
		RedisWait: wait,
	}
}

// Close stops what the handlers run in the background (the mark writer).
// Call it after the worker stopped: every task writes its own marks before
// it ends.
func (h Handlers) Close() {
	if h.Mails != nil && h.Mails.Deliver.marks != nil {
		h.Mails.Deliver.marks.close()
	}
}

// channelErasers are the added channels that keep something of a person
// (channels.Eraser), as a bulk erasure forgets it.
func channelErasers(cs []channels.Channel) []listjobs.ChannelEraser {
	var out []listjobs.ChannelEraser
	for _, c := range cs {
		if e, ok := c.(channels.Eraser); ok {
			out = append(out, personEraser{e})
		}
	}
	return out
}

// personEraser is a channels.Eraser as listjobs calls it.
type personEraser struct{ e channels.Eraser }

func (p personEraser) Erase(ctx context.Context, id int64, email string) error {
	return p.e.Erase(ctx, channels.Person{ID: id, Email: email})
}

// addedLanes are the lanes of the channels added through the seam (one
// generic ChannelLane each), their names as the fan-out knows them, and
// those that track reads (channels.ReadTracker).
func addedLanes(d Deps) (map[string]*ChannelLane, []AddedChannel, map[string]channels.ReadTracker) {
	lanes := map[string]*ChannelLane{}
	var added []AddedChannel
	trackers := map[string]channels.ReadTracker{}
	for _, c := range d.Channels {
		lanes[c.Spec().Name] = &ChannelLane{Channel: c, Store: d.Store, Retry: d.ChannelRetry, ClaimTTL: d.ClaimTTL,
			Now: d.Now, Metrics: d.Metrics, Log: d.Log}
		added = append(added, addedChannel(c.Spec().Name))
		if tr, ok := c.(channels.ReadTracker); ok {
			trackers[c.Spec().Name] = tr
		}
	}
	return lanes, added, trackers
}
