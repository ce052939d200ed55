package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/topics"
)

// Redis is the Store on a Redis server (or miniredis). Every state change is
// one Lua script (scripts.go, or beside its part: redis_issue.go, push.go,
// tokens.go, webhooks.go); the keys are laid out in keys.go.
type Redis struct {
	rdb    redis.UniversalClient
	now    func() time.Time
	topics topicList
	// erasure is the keyed hash of an erased address (WithErasure).
	erasure func(email string) string
}

// topicList is the topics file as the scripts take it.
type topicList struct {
	ids      []string
	all      string // every id, comma-separated
	defaults string // the default ids, comma-separated
}

func newTopicList(s *topics.Set) topicList {
	return topicList{ids: s.IDs(), all: strings.Join(s.IDs(), ","), defaults: strings.Join(s.Defaults(), ",")}
}

// NewRedis returns the store on rdb, with the built-in topics. It does not
// close rdb.
func NewRedis(rdb redis.UniversalClient) *Redis {
	return &Redis{rdb: rdb, now: time.Now, topics: newTopicList(topics.Default(0)), erasure: defaultErasureHash}
}

// WithClock returns the store reading the time from now (for tests).
func (r *Redis) WithClock(now func() time.Time) *Redis {
	c := *r
	c.now = now
	return &c
}

// WithTopics returns the store reading and writing the topics of s.
func (r *Redis) WithTopics(s *topics.Set) *Redis {
	if s == nil {
		return r
	}
	c := *r
	c.topics = newTopicList(s)
	return &c
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func msTime(s string) time.Time { return unixMilli(s, 10) }

// Subscribe implements Subscribers.
func (r *Redis) Subscribe(ctx context.Context, req SubscribeRequest) (Subscriber, error) {
	args, err := r.subscribeArgs(req, at36(r.now()))
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	res, err := subscribeScript.Run(ctx, r.rdb, r.subscribeKeys(req.Email), args...).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	return decodeResult(res)
}

func (r *Redis) subscribeArgs(req SubscribeRequest, now string) ([]any, error) {
	if err := checkFields(req.Email, req.Name, req.Timezone); err != nil {
		return nil, err
	}
	chosen := r.topics.defaults
	if req.Topics != nil {
		chosen = strings.Join(req.Topics, ",")
	}
	return []any{req.Email, req.Name, req.Timezone, now, boolArg(req.Activate),
		req.Outbox.ID, req.Outbox.Body, ms(req.Outbox.Due), boolArg(req.OnlyNew),
		holdSeconds(req.Hold), req.Hold.PerDay, r.topics.all, chosen, ms(r.now()), ReconfirmWindow.Milliseconds(),
		r.erasure(req.Email), string(req.Source)}, nil
}

// subscribeKeys are the KEYS of subscribeScript for email.
func (r *Redis) subscribeKeys(email string) []string {
	cool, day := holdKeys(HoldConfirm, email)
	return []string{keySeq, keyActiveSet, keyOutbox, keyOutboxDue, cool, day, r.dayKey()}
}

// holdKeys are the keys of the allowance of kind for email's mailbox
// (address.Mailbox): its cooldown and its count of the day. The mailbox
// is hashed: the keys need not show addresses to whoever lists them.
func holdKeys(kind, email string) (cool, day string) {
	sum := sha256.Sum256([]byte(address.Mailbox(email)))
	h := hex.EncodeToString(sum[:12])
	return prefixMailHold + kind + ":" + h, prefixMailHoldDay + kind + ":" + h
}

// holdSeconds is h's cooldown as the scripts take it: whole seconds, at
// least one; 0 for none.
func holdSeconds(h ConfirmHold) int64 {
	if h.Every <= 0 {
		return 0
	}
	return max(int64(h.Every/time.Second), 1)
}

// TakeHold implements MailHolds.
func (r *Redis) TakeHold(ctx context.Context, kind, email string, h ConfirmHold) (bool, error) {
	if h.Every <= 0 {
		return true, nil
	}
	cool, day := holdKeys(kind, email)
	n, err := takeHoldScript.Run(ctx, r.rdb, []string{cool, day}, holdSeconds(h), h.PerDay).Int()
	if err != nil {
		return false, fmt.Errorf("take the %s allowance: %w", kind, err)
	}
	return n == 1, nil
}

// GiveBackHold implements MailHolds.
func (r *Redis) GiveBackHold(ctx context.Context, kind, email string) error {
	cool, day := holdKeys(kind, email)
	who := ""
	if kind == HoldConfirm {
		who = email
	}
	if err := giveBackHoldScript.Run(ctx, r.rdb, []string{cool, day}, who).Err(); err != nil {
		return fmt.Errorf("give back the %s allowance: %w", kind, err)
	}
	return nil
}

// Confirm implements Subscribers.
func (r *Redis) Confirm(ctx context.Context, email string, welcome OutboxEntry) (Subscriber, error) {
	res, err := confirmScript.Run(ctx, r.rdb, []string{keyActiveSet, keyOutbox, keyOutboxDue, r.dayKey()},
		email, at36(r.now()), welcome.ID, welcome.Body, ms(welcome.Due), r.topics.all, ms(r.now()), r.erasure(email)).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("confirm %s: %w", email, err)
	}
	return decodeResult(res)
}

// Unsubscribe implements Subscribers.
func (r *Redis) Unsubscribe(ctx context.Context, email string, cancel ...string) (Subscriber, error) {
	return r.end(ctx, email, Unsubscribed, cancel)
}

// MarkBounced implements Subscribers.
func (r *Redis) MarkBounced(ctx context.Context, email string) error {
	_, err := r.end(ctx, email, Bounced, nil)
	return err
}

func (r *Redis) end(ctx context.Context, email string, to Status, cancel []string) (Subscriber, error) {
	args := []any{email, at36(r.now()), codeByStatus[to], r.topics.all}
	for _, id := range cancel {
		args = append(args, id)
	}
	res, err := endScript.Run(ctx, r.rdb, []string{keyActiveSet, keyOutbox, keyOutboxDue, r.dayKey()}, args...).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("mark %s %s: %w", email, to, err)
	}
	return decodeResult(res)
}

// Get implements Subscribers.
func (r *Redis) Get(ctx context.Context, email string) (Subscriber, error) {
	res, err := getScript.Run(ctx, r.rdb, nil, email, r.topics.all).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %s: %w", email, err)
	}
	return decodeResult(res)
}

// GetByID implements Subscribers.
func (r *Redis) GetByID(ctx context.Context, id int64) (Subscriber, error) {
	if id <= 0 {
		return Subscriber{}, ErrNotFound
	}
	res, err := getByIDScript.Run(ctx, r.rdb, nil, id, r.topics.all).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %d: %w", id, err)
	}
	return decodeResult(res)
}

// SetPreferences implements Subscribers.
func (r *Redis) SetPreferences(ctx context.Context, email string, p Preferences, cancel Cancel) (Subscriber, error) {
	if err := checkFields(p.Name, p.Timezone); err != nil {
		return Subscriber{}, fmt.Errorf("preferences of %s: %w", email, err)
	}
	return r.changeTopics(ctx, email, "set", strings.Join(p.Topics, ","), p.Name, p.Timezone, cancel)
}

// LeaveTopic implements Subscribers.
func (r *Redis) LeaveTopic(ctx context.Context, email, topic string, cancel Cancel) (Subscriber, error) {
	return r.changeTopics(ctx, email, "leave", topic, "", "", cancel)
}

func (r *Redis) changeTopics(ctx context.Context, email, mode, list, name, tz string, cancel Cancel) (Subscriber, error) {
	args := []any{email, at36(r.now()), r.topics.all, mode, list, cancel.Topic, name, tz}
	for _, id := range cancel.Outbox {
		args = append(args, id)
	}
	res, err := topicsScript.Run(ctx, r.rdb, []string{keyActiveSet, keyOutbox, keyOutboxDue, r.dayKey()}, args...).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("change the topics of %s: %w", email, err)
	}
	sub, err := decodeResult(res)
	// The script changes active subscribers only (ErrNotActive
	// otherwise): one it answers unsubscribed left in this call.
	sub.Ended = err == nil && sub.Status == Unsubscribed
	return sub, err
}

// OutboxDone implements Outbox.
func (r *Redis) OutboxDone(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, keyOutbox, ids...)
		p.ZRem(ctx, keyOutboxDue, members...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear %d outbox entries: %w", len(ids), err)
	}
	return nil
}

// OutboxDue implements Outbox.
func (r *Redis) OutboxDue(ctx context.Context, before time.Time, limit int) ([]OutboxEntry, error) {
	zs, err := r.rdb.ZRangeByScoreWithScores(ctx, keyOutboxDue, &redis.ZRangeBy{
		Min: "-inf", Max: ms(before), Count: int64(limit),
	}).Result()
	if err != nil || len(zs) == 0 {
		return nil, wrapErr("list outbox", err)
	}
	ids := make([]string, len(zs))
	for i, z := range zs {
		ids[i] = z.Member.(string)
	}
	bodies, err := r.rdb.HMGet(ctx, keyOutbox, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	out := make([]OutboxEntry, 0, len(ids))
	for i, b := range bodies {
		s, ok := b.(string)
		if !ok { // removed between the two reads: its task is enqueued
			continue
		}
		out = append(out, OutboxEntry{ID: ids[i], Due: time.UnixMilli(int64(zs[i].Score)), Body: []byte(s)})
	}
	return out, nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// markKeys are a mark's sent key (a bitmap for shared marks) and its
// claim: a hash of claims for shared marks, a key of its own otherwise.
func markKeys(m Mark) (sent, claim string) {
	base := m.Kind + ":" + m.Key
	if m.Shared {
		return prefixSent + base, prefixClaims + base
	}
	id := strconv.FormatInt(m.SubscriberID, 10)
	return prefixSent + base + ":" + id, prefixClaim + base + ":" + id
}

// MarkSent implements Marks: one pipeline for all the marks. Each mark's
// sent bit is set before its claim is dropped (every SETBIT comes before
// the HDELs), so a mark is never seen neither sent nor claimed; no
// transaction is needed for that, and none is paid for.
//
// The same pipeline keeps what PersonalData reads back: each shared
// mark's kind and key in keySentKeys (one entry per key, not per mark),
// and each other mark in its subscriber's mail log (prefixMailLog).
func (r *Redis) MarkSent(ctx context.Context, marks ...Mark) error {
	if len(marks) == 0 {
		return nil
	}
	// A shared mark's claim is a field of its key's claims hash: the
	// fields of one hash go in one HDEL, not one command each.
	done := map[string][]string{}
	var hashes []string // in order, so the pipeline is the same each time
	now := r.now()
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range marks {
			sent, claim := markKeys(m)
			if !m.Shared {
				p.Set(ctx, sent, "1", sentTTL)
				p.Del(ctx, claim)
				log := prefixMailLog + strconv.FormatInt(m.SubscriberID, 10)
				p.ZAdd(ctx, log, redis.Z{Score: float64(now.UnixMilli()), Member: m.Kind + ":" + m.Key})
				p.ZRemRangeByRank(ctx, log, 0, -mailLogCap-1)
				p.Expire(ctx, log, sentTTL)
				continue
			}
			p.SetBit(ctx, sent, m.SubscriberID, 1)
			if _, seen := done[claim]; !seen {
				hashes = append(hashes, claim)
				score := float64(sentKeyForever)
				if m.Key != "" {
					p.Expire(ctx, sent, sharedSentTTL)
					score = float64(now.UnixMilli())
				}
				p.ZAdd(ctx, keySentKeys, redis.Z{Score: score, Member: m.Kind + ":" + m.Key})
			}
			done[claim] = append(done[claim], strconv.FormatInt(m.SubscriberID, 10))
		}
		for _, claim := range hashes {
			p.HDel(ctx, claim, done[claim]...)
		}
		return nil
	})
	return wrapErr(fmt.Sprintf("mark %d deliveries sent", len(marks)), err)
}

// SentMarks implements Marks.
func (r *Redis) SentMarks(ctx context.Context, marks []Mark) ([]bool, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.IntCmd, len(marks))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range marks {
			sent, _ := markKeys(m)
			if m.Shared {
				cmds[i] = p.GetBit(ctx, sent, m.SubscriberID)
			} else {
				cmds[i] = p.Exists(ctx, sent)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d delivery marks: %w", len(marks), err)
	}
	out := make([]bool, len(marks))
	for i, c := range cmds {
		out[i] = c.Val() == 1
	}
	return out, nil
}

// Ping implements Subscribers.
func (r *Redis) Ping(ctx context.Context) error {
	return r.rdb.Ping(ctx).Err()
}

// SubscribeMany runs Subscribe for many requests in one pipeline (bulk
// import). The errors line up with reqs.
func (r *Redis) SubscribeMany(ctx context.Context, reqs []SubscribeRequest) ([]error, error) {
	now := at36(r.now())
	errs := make([]error, len(reqs))
	var args [][]any
	var at []int // args[j] is reqs[at[j]]
	for i, req := range reqs {
		a, err := r.subscribeArgs(req, now)
		if err != nil {
			errs[i] = err
			continue
		}
		args, at = append(args, a), append(at, i)
	}
	if len(args) == 0 {
		return errs, nil
	}
	cmds, err := runPipelined(ctx, r.rdb, subscribeScript, func(j int) []string { return r.subscribeKeys(reqs[at[j]].Email) }, args)
	if err != nil {
		return nil, fmt.Errorf("subscribe %d addresses: %w", len(reqs), err)
	}
	for j, c := range cmds {
		i := at[j]
		res, err := c.StringSlice()
		if err == nil {
			_, err = decodeResult(res)
		}
		errs[i] = err
	}
	return errs, nil
}

var _ Store = (*Redis)(nil)
