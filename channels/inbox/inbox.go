package inbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/address"
)

// Name is the channel's: its lane, queue, task type prefix and the word
// in "channels" and the preference centre.
const Name = "inbox"

// Plugin registers the inbox (cmd/newsletter's addedChannels). It is on
// when NEWSLETTER_INBOX_SECRET is set.
var Plugin = channels.Plugin{
	Name:      Name,
	Label:     "In the app",
	DefaultOn: true,
	Workers:   8,
	On:        func(getenv func(string) string) bool { return getenv("NEWSLETTER_INBOX_SECRET") != "" },
	New:       func(env channels.Env) (channels.Channel, error) { return New(env) },
}

// Defaults and bounds of the settings.
const (
	DefaultKeep       = 200
	DefaultDays       = 90
	DefaultMaxStreams = 20_000
	// MaxStreamsPerPerson bounds one person's open streams (tabs,
	// devices): a leaked signature cannot hold a replica's streams.
	MaxStreamsPerPerson = 8
	// minSecret is the shortest secret taken: an HMAC key guessable by
	// search would let anyone read anyone's inbox.
	minSecret = 16
)

// Config is the inbox's settings.
type Config struct {
	// Secret is the HMAC-SHA256 key of the readers' signatures.
	Secret []byte
	// Origins may call the reader API from a browser (CORS); none: only
	// the service's own pages (the no-JS page, the component served from
	// here).
	Origins []string
	// Keep is how many messages a person's inbox holds; Days how long.
	Keep, Days int
	// MaxStreams bounds the open streams of one process.
	MaxStreams int
}

// ReadConfig reads the inbox's settings from the environment:
// NEWSLETTER_INBOX_SECRET, _ORIGINS, _KEEP, _DAYS and _STREAMS.
func ReadConfig(getenv func(string) string) (Config, error) {
	c := Config{Secret: []byte(getenv("NEWSLETTER_INBOX_SECRET")), Keep: DefaultKeep, Days: DefaultDays, MaxStreams: DefaultMaxStreams}
	var errs []error
	if len(c.Secret) < minSecret {
		errs = append(errs, fmt.Errorf("NEWSLETTER_INBOX_SECRET: want at least %d characters (a random key: openssl rand -hex 32)", minSecret))
	}
	for o := range strings.SplitSeq(getenv("NEWSLETTER_INBOX_ORIGINS"), ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if !validOrigin(o) {
			errs = append(errs, fmt.Errorf("NEWSLETTER_INBOX_ORIGINS: %q is not an origin (scheme://host[:port], no path)", o))
			continue
		}
		c.Origins = append(c.Origins, o)
	}
	for _, v := range []struct {
		name     string
		to       *int
		min, max int
	}{
		{"NEWSLETTER_INBOX_KEEP", &c.Keep, 1, 1000},
		{"NEWSLETTER_INBOX_DAYS", &c.Days, 1, 3650},
		{"NEWSLETTER_INBOX_STREAMS", &c.MaxStreams, 1, 1_000_000},
	} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min || n > v.max {
			errs = append(errs, fmt.Errorf("%s: want a whole number from %d to %d, got %q", v.name, v.min, v.max, s))
			continue
		}
		*v.to = n
	}
	return c, errors.Join(errs...)
}

// validOrigin tells a browser origin: http(s)://host[:port], nothing
// after.
func validOrigin(o string) bool {
	rest, ok := strings.CutPrefix(o, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(o, "http://")
	}
	return ok && rest != "" && !strings.ContainsAny(rest, "/?#@ \t")
}

// Hash is the signature of a reader: lowercase hex HMAC-SHA256, keyed
// with secret, of their address normalised as the service normalises
// addresses (internal/address). The product's backend computes the same
// (docs/channels.md has it in Go, Node and Python).
func Hash(secret []byte, email string) (string, error) {
	norm, err := address.Normalize(email)
	if err != nil {
		return "", err
	}
	return hashOf(secret, norm), nil
}

func hashOf(secret []byte, normalised string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(normalised))
	return hex.EncodeToString(m.Sum(nil))
}

// Channel is the in-app inbox: a channels.Channel whose Send writes each
// message into its reader's inbox in Redis, and whose routes (Handler)
// are the readers' API, event stream, page and web component.
type Channel struct {
	cfg    Config
	rdb    redis.UniversalClient
	people channels.People
	log    *slog.Logger
	store  *store
	hub    *hub
	now    func() time.Time
	// heartbeat is how often an idle stream pings and reads its log
	// (the const heartbeat; a test makes it long, so that only a notice
	// can wake a stream).
	heartbeat time.Duration
}

// New builds the inbox from env.
func New(env channels.Env) (*Channel, error) {
	cfg, err := ReadConfig(env.Getenv)
	if err != nil {
		return nil, err
	}
	c := NewWith(cfg, env)
	if n := openFiles(); n > 0 && n < uint64(c.cfg.MaxStreams)+fileHeadroom {
		c.log.Warn("inbox: the process may open fewer files than its streams need: raise its limit (LimitNOFILE, ulimit -n) or lower NEWSLETTER_INBOX_STREAMS",
			"open_files", n, "streams", c.cfg.MaxStreams, "want_at_least", uint64(c.cfg.MaxStreams)+fileHeadroom)
	}
	return c, nil
}

// fileHeadroom is the open files a process needs beside its streams:
// Redis connections, providers, the console's and the API's clients.
const fileHeadroom = 1024

// NewWith builds the inbox with cfg.
func NewWith(cfg Config, env channels.Env) *Channel {
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Days <= 0 {
		cfg.Days = DefaultDays
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	c := &Channel{cfg: cfg, rdb: env.Redis, people: env.People, log: log, now: time.Now, heartbeat: heartbeat}
	c.store = &store{rdb: env.Redis, keep: cfg.Keep, keepFor: time.Duration(cfg.Days) * 24 * time.Hour, now: func() time.Time { return c.now() }}
	c.hub = newHub(env.Redis, log, cfg.MaxStreams, MaxStreamsPerPerson)
	return c
}

// MaxBody bounds one message as the lane hands it over (the event as
// JSON): a title, a Markdown body of at most 4,000 characters (the
// events API's bound) and a URL fit with room.
const MaxBody = 24 << 10

// Spec: a batch is one pipeline of writes to Redis.
func (c *Channel) Spec() channels.Spec {
	return channels.Spec{Name: Name, MaxBatch: 100, MaxBody: MaxBody}
}

// MessageID is the id in a person's inbox of the event key's message:
// the key made safe for a URL path ("ev:ev_x" → "ev_x").
func MessageID(key string) string {
	return strings.NewReplacer(":", "-", "/", "-").Replace(strings.TrimPrefix(key, "ev:"))
}

// Send writes each message into its reader's inbox, all of the batch in
// one round trip, then wakes their open streams. A message written
// before (a retry) is not written again; Redis away answers Retry for
// the batch, which the lane holds as it holds every lane's.
func (c *Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	out := make([]channels.Outcome, len(batch))
	cmds := make([]*redis.Cmd, len(batch))
	msgs := make([]Message, len(batch))
	people := make([]int64, len(batch))
	pipe := c.rdb.Pipeline()
	for i, m := range batch {
		var ev channels.EventMessage
		if err := json.Unmarshal(m.Body, &ev); err != nil || ev.Person <= 0 || ev.Key == "" {
			out[i] = channels.Outcome{Verdict: channels.Drop, Err: fmt.Errorf("inbox: not an event: %v", err)}
			continue
		}
		body, err := renderBody(ev.Body)
		if err != nil {
			out[i] = channels.Outcome{Verdict: channels.Drop, Err: fmt.Errorf("inbox: body: %w", err)}
			continue
		}
		msg := Message{ID: MessageID(ev.Key), Title: ev.Title, Body: body, URL: ev.URL, Created: ev.At.UTC().Truncate(time.Millisecond)}
		if ev.At.IsZero() {
			msg.Created = c.now().UTC().Truncate(time.Millisecond)
		}
		if len(ev.Topics) > 0 {
			msg.Topic = ev.Topics[0]
		}
		if cmds[i], err = c.store.addCmd(ctx, pipe, ev.Person, msg); err != nil {
			out[i] = channels.Outcome{Verdict: channels.Drop, Err: err}
			continue
		}
		msgs[i], people[i] = msg, ev.Person
		publishCmd(ctx, c.rdb, pipe, ev.Person)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReplyErr(err) {
		c.log.Warn("inbox: write a batch", "err", err)
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		err := cmd.Err()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err = c.store.addAgain(ctx, people[i], msgs[i]); err == nil {
				c.hub.publish(ctx, people[i])
			}
		}
		if err != nil {
			out[i] = channels.Outcome{Verdict: channels.Retry, Err: fmt.Errorf("inbox: write: %w", err)}
			continue
		}
		out[i] = channels.Outcome{Verdict: channels.Sent, ProviderID: msgs[i].ID}
	}
	return out
}

// isReplyErr tells an error reply of one command (the others ran) from
// a connection's failure.
func isReplyErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// Unread answers whether person p read the message of event key
// (channels.ReadTracker): the unread fallback's check.
func (c *Channel) Unread(ctx context.Context, p channels.Person, key string) (channels.Unread, error) {
	m, err := c.store.one(ctx, p.ID, MessageID(key))
	switch {
	case errors.Is(err, errNoMessage):
		return channels.NotDelivered, nil
	case err != nil:
		return channels.NotDelivered, err
	case m.Read || m.Archived:
		return channels.IsRead, nil
	}
	return channels.IsUnread, nil
}

// Export is the person's inbox, every message (channels.Exporter).
func (c *Channel) Export(ctx context.Context, p channels.Person) (any, error) {
	msgs, err := c.store.all(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"messages": msgs}, nil
}

// Erase deletes the person's inbox (channels.Eraser).
func (c *Channel) Erase(ctx context.Context, p channels.Person) error {
	if err := c.store.erase(ctx, p.ID); err != nil {
		return err
	}
	c.hub.publish(ctx, p.ID)
	return nil
}

// Root serves the reader routes at /inbox (channels.Rooted): the
// product's pages link there.
func (c *Channel) Root() string { return "/inbox" }

// CloseStreams ends the open event streams (channels.Streaming): the
// server is shutting down, and each browser reconnects, to another
// replica, with its Last-Event-ID.
func (c *Channel) CloseStreams() { c.hub.close() }

// OpenStreams is how many event streams this process has open.
func (c *Channel) OpenStreams() int { return c.hub.count() }
