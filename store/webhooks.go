package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// WebhookState is whether an outgoing webhook endpoint gets events.
type WebhookState string

// The states of an endpoint. A disabled one gets nothing until an admin
// enables it again; its events wait in the archive (dead letters).
const (
	WebhookActive   WebhookState = "active"
	WebhookDisabled WebhookState = "disabled"
)

// Webhook is one endpoint an admin registered for outgoing webhooks.
type Webhook struct {
	ID     string
	URL    string
	Events []string // the event types it gets
	// Secret signs what it gets (whsec_…); shown to the admin once, at
	// registration, and kept here because HMAC needs it at every send.
	Secret string
	State  WebhookState
	// Failures counts the failed attempts since the last delivery;
	// FailingSince is the first of them (zero while none).
	Failures     int
	FailingSince time.Time
	DisabledAt   time.Time
	CreatedAt    time.Time
}

// Wants tells whether the endpoint is active and gets events of typ.
func (w Webhook) Wants(typ string) bool {
	if w.State != WebhookActive {
		return false
	}
	for _, e := range w.Events {
		if e == typ {
			return true
		}
	}
	return false
}

// WebhookPolicy is when an endpoint that keeps failing is disabled: it has
// failed MinFailures attempts in a row and the first of them is at least
// DisableAfter ago. Both: a burst of failures in a minute (a deploy) is
// not a dead endpoint, and neither is one failure a day ago.
type WebhookPolicy struct {
	DisableAfter time.Duration // default DefaultWebhookDisableAfter
	MinFailures  int           // default DefaultWebhookMinFailures
}

// Defaults of WebhookPolicy: a day of failing, as long as an event is
// retried.
const (
	DefaultWebhookDisableAfter = 24 * time.Hour
	DefaultWebhookMinFailures  = 5
)

func (p WebhookPolicy) withDefaults() WebhookPolicy {
	if p.DisableAfter <= 0 {
		p.DisableAfter = DefaultWebhookDisableAfter
	}
	if p.MinFailures <= 0 {
		p.MinFailures = DefaultWebhookMinFailures
	}
	return p
}

// Disables tells whether an endpoint failing failures times in a row
// since since is disabled at now.
func (p WebhookPolicy) Disables(failures int, since, now time.Time) bool {
	p = p.withDefaults()
	return failures >= p.MinFailures && !since.IsZero() && now.Sub(since) >= p.DisableAfter
}

// MaxWebhooks is how many endpoints may be registered: every event is one
// task per endpoint that wants it.
const MaxWebhooks = 100

// Errors of the webhook endpoints.
var (
	ErrWebhookNotFound   = errors.New("webhook endpoint not found")
	ErrWebhookExists     = errors.New("a webhook endpoint with this id exists")
	ErrTooManyWebhooks   = fmt.Errorf("at most %d webhook endpoints", MaxWebhooks)
	errWebhookIncomplete = errors.New("a webhook endpoint needs an id, a URL, events and a secret")
)

// Webhooks are the outgoing webhook endpoints.
type Webhooks interface {
	// AddWebhook registers w (its ID, URL, Events and Secret; the caller
	// checked them) as active, created now. ErrWebhookExists when the
	// id is taken, ErrTooManyWebhooks past MaxWebhooks.
	AddWebhook(ctx context.Context, w Webhook) (Webhook, error)
	// ListWebhooks is every endpoint, oldest first, secrets included.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// GetWebhook is one endpoint (ErrWebhookNotFound).
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	// DeleteWebhook removes an endpoint (ErrWebhookNotFound).
	DeleteWebhook(ctx context.Context, id string) error
	// WebhookDelivered records a delivery: the failures start again
	// from nothing.
	WebhookDelivered(ctx context.Context, id string) error
	// WebhookFailed counts a failed attempt of an active endpoint and
	// disables it when p says so; a disabled one stays as it is. It
	// answers the endpoint as it is afterwards.
	WebhookFailed(ctx context.Context, id string, p WebhookPolicy) (Webhook, error)
	// DisableWebhook disables an endpoint now (it answered 410 Gone).
	DisableWebhook(ctx context.Context, id string) (Webhook, error)
	// EnableWebhook makes an endpoint active again, with no failures.
	EnableWebhook(ctx context.Context, id string) (Webhook, error)
	// RecordWebhookDelivery keeps one attempt in the endpoint's log of
	// deliveries (the last MaxWebhookDeliveries); an endpoint removed
	// meanwhile keeps nothing (ErrWebhookNotFound).
	RecordWebhookDelivery(ctx context.Context, id string, d WebhookDelivery) error
	// WebhookDeliveries are the endpoint's last attempts, newest first
	// (ErrWebhookNotFound when there is no endpoint).
	WebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error)
}

// MaxWebhookDeliveries is how many attempts an endpoint's log keeps.
const MaxWebhookDeliveries = 50

// WebhookDelivery is one attempt to deliver an event to an endpoint.
type WebhookDelivery struct {
	At    time.Time `json:"at"`
	Event string    `json:"event"` // the webhook-id
	Type  string    `json:"type"`
	// Test marks a sample event an admin asked for (POST
	// /api/webhooks/{id}/test): it counts no failure of the endpoint.
	Test bool `json:"test,omitempty"`
	// OK is a 2xx answer; Status is the answer's code (0: no answer);
	// Error says what went wrong ("" when OK).
	OK     bool   `json:"ok"`
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Check tells whether w can be stored: an id (no colons or commas: it is
// part of task ids), a URL, events (names without commas) and a secret.
// Whether the URL may be called and the events exist is the caller's to
// check.
func (w Webhook) Check() error {
	if w.ID == "" || w.URL == "" || len(w.Events) == 0 || w.Secret == "" {
		return errWebhookIncomplete
	}
	if strings.ContainsAny(w.ID, ":,") {
		return fmt.Errorf("webhook id %q: no colons or commas", w.ID)
	}
	for _, e := range w.Events {
		if e == "" || strings.Contains(e, ",") {
			return fmt.Errorf("webhook event %q: not a name", e)
		}
	}
	return nil
}

// addWebhookScript registers an endpoint.
//
//	KEYS[1]  keyWebhooks
//	KEYS[2]  the endpoint's hash
//	ARGV[1]  id
//	ARGV[2]  url
//	ARGV[3]  events, comma-separated
//	ARGV[4]  secret
//	ARGV[5]  now, unix ms
//	ARGV[6]  MaxWebhooks
//
// Answers 'ok', 'exists' or 'full'.
var addWebhookScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 'exists' end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[6]) then return 'full' end
redis.call('HSET', KEYS[2], 'url', ARGV[2], 'events', ARGV[3], 'secret', ARGV[4],
  'state', 'active', 'failures', 0, 'created', ARGV[5])
redis.call('ZADD', KEYS[1], ARGV[5], ARGV[1])
return 'ok'
`)

// webhookFailedScript counts a failed attempt of an active endpoint and
// disables it once it has failed ARGV[3] times in a row, the first of
// them at least ARGV[2] ms ago (WebhookPolicy).
//
//	KEYS[1]  the endpoint's hash
//	ARGV[1]  now, unix ms
//	ARGV[2]  DisableAfter, ms
//	ARGV[3]  MinFailures
//
// Answers the endpoint's hash (HGETALL), or nil when there is none.
var webhookFailedScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('HGET', KEYS[1], 'state') == 'active' then
  local n = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  redis.call('HSETNX', KEYS[1], 'since', ARGV[1])
  local since = tonumber(redis.call('HGET', KEYS[1], 'since'))
  if n >= tonumber(ARGV[3]) and tonumber(ARGV[1]) - since >= tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[1], 'state', 'disabled', 'disabled', ARGV[1])
  end
end
return redis.call('HGETALL', KEYS[1])
`)

// webhookStateScript changes an endpoint that exists: delivered (the
// failures start again), disabled now, or enabled (active, no failures).
//
//	KEYS[1]  the endpoint's hash
//	ARGV[1]  'delivered', 'disable' or 'enable'
//	ARGV[2]  now, unix ms
//
// Answers the endpoint's hash (HGETALL), or nil when there is none.
var webhookStateScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[1] == 'delivered' then
  redis.call('HSET', KEYS[1], 'failures', 0)
  redis.call('HDEL', KEYS[1], 'since')
elseif ARGV[1] == 'disable' then
  if redis.call('HGET', KEYS[1], 'state') ~= 'disabled' then
    redis.call('HSET', KEYS[1], 'state', 'disabled', 'disabled', ARGV[2])
  end
else
  redis.call('HSET', KEYS[1], 'state', 'active', 'failures', 0)
  redis.call('HDEL', KEYS[1], 'since', 'disabled')
end
return redis.call('HGETALL', KEYS[1])
`)

// AddWebhook implements Webhooks.
func (r *Redis) AddWebhook(ctx context.Context, w Webhook) (Webhook, error) {
	if err := w.Check(); err != nil {
		return Webhook{}, err
	}
	now := r.now()
	res, err := addWebhookScript.Run(ctx, r.rdb, []string{keyWebhooks, webhookKey(w.ID)},
		w.ID, w.URL, strings.Join(w.Events, ","), w.Secret, now.UnixMilli(), MaxWebhooks).Text()
	if err != nil {
		return Webhook{}, fmt.Errorf("add webhook endpoint: %w", err)
	}
	switch res {
	case "exists":
		return Webhook{}, ErrWebhookExists
	case "full":
		return Webhook{}, ErrTooManyWebhooks
	}
	w.State, w.Failures, w.FailingSince, w.DisabledAt = WebhookActive, 0, time.Time{}, time.Time{}
	w.CreatedAt = time.UnixMilli(now.UnixMilli()).UTC()
	return w, nil
}

// ListWebhooks implements Webhooks.
func (r *Redis) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	ids, err := r.rdb.ZRange(ctx, keyWebhooks, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	if len(ids) == 0 {
		return []Webhook{}, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, webhookKey(id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	out := make([]Webhook, 0, len(ids))
	for i, id := range ids {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue // deleted between the two reads
		}
		out = append(out, decodeWebhook(id, h))
	}
	return out, nil
}

// GetWebhook implements Webhooks.
func (r *Redis) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	h, err := r.rdb.HGetAll(ctx, webhookKey(id)).Result()
	if err != nil {
		return Webhook{}, fmt.Errorf("load webhook endpoint: %w", err)
	}
	if len(h) == 0 {
		return Webhook{}, ErrWebhookNotFound
	}
	return decodeWebhook(id, h), nil
}

// DeleteWebhook implements Webhooks.
func (r *Redis) DeleteWebhook(ctx context.Context, id string) error {
	var del *redis.IntCmd
	if _, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, keyWebhooks, id)
		del = p.Del(ctx, webhookKey(id))
		p.Del(ctx, webhookDeliveriesKey(id))
		return nil
	}); err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	if del.Val() == 0 {
		return ErrWebhookNotFound
	}
	return nil
}

// recordDeliveryScript keeps one attempt in an endpoint's log.
//
//	KEYS[1]  the endpoint's hash   KEYS[2]  its log of deliveries
//	ARGV[1]  the attempt (JSON)    ARGV[2]  MaxWebhookDeliveries
//
// Pushes the attempt on the log's head and trims it to ARGV[2]. Answers
// 1, or 0 when the endpoint is gone (nothing written: a removed
// endpoint's log would never be read or removed).
var recordDeliveryScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
return 1
`)

// RecordWebhookDelivery implements Webhooks.
func (r *Redis) RecordWebhookDelivery(ctx context.Context, id string, d WebhookDelivery) error {
	if d.At.IsZero() {
		d.At = r.now()
	}
	d.At = d.At.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("webhook delivery: %w", err)
	}
	n, err := recordDeliveryScript.Run(ctx, r.rdb, []string{webhookKey(id), webhookDeliveriesKey(id)}, b, MaxWebhookDeliveries).Int()
	if err != nil {
		return fmt.Errorf("record webhook delivery: %w", err)
	}
	if n == 0 {
		return ErrWebhookNotFound
	}
	return nil
}

// WebhookDeliveries implements Webhooks.
func (r *Redis) WebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error) {
	var exists *redis.IntCmd
	var list *redis.StringSliceCmd
	if _, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, webhookKey(id))
		list = p.LRange(ctx, webhookDeliveriesKey(id), 0, -1)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	if exists.Val() == 0 {
		return nil, ErrWebhookNotFound
	}
	out := make([]WebhookDelivery, 0, len(list.Val()))
	for _, s := range list.Val() {
		var d WebhookDelivery
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return nil, fmt.Errorf("webhook %s: unreadable delivery: %w", id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// WebhookDelivered implements Webhooks.
func (r *Redis) WebhookDelivered(ctx context.Context, id string) error {
	_, err := r.webhookState(ctx, id, "delivered")
	return err
}

// DisableWebhook implements Webhooks.
func (r *Redis) DisableWebhook(ctx context.Context, id string) (Webhook, error) {
	return r.webhookState(ctx, id, "disable")
}

// EnableWebhook implements Webhooks.
func (r *Redis) EnableWebhook(ctx context.Context, id string) (Webhook, error) {
	return r.webhookState(ctx, id, "enable")
}

func (r *Redis) webhookState(ctx context.Context, id, change string) (Webhook, error) {
	res, err := webhookStateScript.Run(ctx, r.rdb, []string{webhookKey(id)}, change, r.now().UnixMilli()).StringSlice()
	return webhookAnswer(id, res, err, change)
}

// WebhookFailed implements Webhooks.
func (r *Redis) WebhookFailed(ctx context.Context, id string, p WebhookPolicy) (Webhook, error) {
	p = p.withDefaults()
	res, err := webhookFailedScript.Run(ctx, r.rdb, []string{webhookKey(id)},
		r.now().UnixMilli(), p.DisableAfter.Milliseconds(), p.MinFailures).StringSlice()
	return webhookAnswer(id, res, err, "count a failure of")
}

// webhookAnswer decodes a script's HGETALL answer.
func webhookAnswer(id string, res []string, err error, what string) (Webhook, error) {
	if errors.Is(err, redis.Nil) {
		return Webhook{}, ErrWebhookNotFound
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("%s webhook endpoint: %w", what, err)
	}
	h := make(map[string]string, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		h[res[i]] = res[i+1]
	}
	return decodeWebhook(id, h), nil
}

func decodeWebhook(id string, h map[string]string) Webhook {
	n, _ := strconv.Atoi(h["failures"])
	w := Webhook{
		ID: id, URL: h["url"], Secret: h["secret"], State: WebhookState(h["state"]), Failures: n,
		FailingSince: msTimeOrZero(h["since"]), DisabledAt: msTimeOrZero(h["disabled"]), CreatedAt: msTimeOrZero(h["created"]),
	}
	if h["events"] != "" {
		w.Events = strings.Split(h["events"], ",")
	}
	return w
}

func msTimeOrZero(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s == "" {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}
