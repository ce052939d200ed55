package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConsentSource is how a person came onto the list: what a privacy
// officer needs to show that they asked for the mail.
type ConsentSource string

// The consent sources.
const (
	SourceForm   ConsentSource = "form"   // the signup form (or a signup link)
	SourceImport ConsentSource = "import" // newsletter import: consent collected elsewhere
	SourceAPI    ConsentSource = "api"    // POST /subscribe with a JSON body
	// SourceAdmin: added by hand (POST /api/subscribers, the console),
	// with the reason and the actor recorded beside.
	SourceAdmin ConsentSource = "admin"
)

// Consent is how and when a subscription was asked for and confirmed.
type Consent struct {
	// Source is empty for subscriptions from before it was recorded.
	Source      ConsentSource `json:"source,omitempty"`
	RequestedAt time.Time     `json:"requested_at,omitzero"`
	ConfirmedAt time.Time     `json:"confirmed_at,omitzero"`
	// Reason and Actor: an admin's addition without double opt-in
	// (SourceAdmin), why and by whom.
	Reason string `json:"reason,omitempty"`
	Actor  string `json:"actor,omitempty"`
}

// SentMail is one mail the delivery marks say a person was sent.
type SentMail struct {
	Kind string `json:"kind"` // the mark kind: digest, issue, a sequence step's template, confirm, …
	Key  string `json:"key"`  // the digest's period, the id, a request's nonce; "" for a sequence step
	// At is when it was sent, for the mails of one person alone
	// (confirmations, unsubscribe links, event bundles); the shared ones
	// (digests, issues, sequence steps) keep no time per person.
	At time.Time `json:"at,omitzero"`
}

// FeedbackEvent is one bounce or complaint report about a person.
type FeedbackEvent struct {
	Type FeedbackType `json:"type"`
	At   time.Time    `json:"at"`
}

// PersonalData is everything the store holds about one person (GDPR Art.
// 15): what the export answers and the console's subscriber page shows.
type PersonalData struct {
	Subscriber Subscriber `json:"subscriber"`
	Consent    Consent    `json:"consent"`
	// Mails are the mails sent, by the delivery marks still kept (120 days
	// for digests and issues, 30 for a person's own mails; sequence steps
	// for ever), shared ones first in the order they were last marked.
	Mails []SentMail `json:"mails_sent"`
	// Feedback are the bounce and complaint reports, newest first.
	Feedback []FeedbackEvent `json:"feedback"`
	// SoftBounces are those counted within the soft-bounce window.
	SoftBounces int  `json:"soft_bounces"`
	Suppressed  bool `json:"suppressed"`
	// Reconfirming: a confirmation of this suppressed address is waiting.
	Reconfirming bool               `json:"reconfirming"`
	Push         []PushSubscription `json:"push_subscriptions"`
	Devices      []Device           `json:"devices"`
	// Phone is the person's number for SMS (nil: none).
	Phone *Phone `json:"phone"`
	// Channels are the channels they chose per topic (the others have
	// DefaultChannels).
	Channels Channels `json:"channels"`
	// OnboardingSince is when the person entered the onboarding sequence
	// (zero when not in it).
	OnboardingSince time.Time `json:"onboarding_since,omitzero"`
	// Clicks are the person's own clicks on links in mails, kept only
	// with NEWSLETTER_ENGAGEMENT=per-person (NEWSLETTER_ENGAGEMENT_DAYS);
	// empty otherwise, since the aggregate counts name nobody.
	Clicks []PersonClick `json:"clicks"`
}

// SubscriberQuery asks for one page of the list.
type SubscriberQuery struct {
	Status Status // "" for any
	Topic  string // "" for any; a topic id the caller checked
	After  int64  // the last id of the previous page (0: from the start)
	// Before is the first id of the next page: the page before it
	// (0: not asked; After and Before are not given together).
	Before int64
	Limit  int // 1..MaxSubscriberPage
}

// MaxSubscriberPage is the largest page ListSubscribers gives.
const MaxSubscriberPage = 500

// SubscriberPage is one page of the list, in id order.
type SubscriberPage struct {
	Subscribers []Subscriber `json:"subscribers"`
	// Next is the After of the next page; 0 when this is the last.
	Next int64 `json:"next,omitempty"`
	// Prev is the Before of the page before; 0 when this is the first.
	Prev int64 `json:"prev,omitempty"`
	// Total is how many subscribers the query's status and topic select
	// (from the bitmaps: it costs the same at any size).
	Total int64 `json:"total"`
}

// DayCount is one day's counters (UTC).
type DayCount struct {
	Day           string `json:"day"` // YYYY-MM-DD
	Signups       int64  `json:"signups"`
	Imports       int64  `json:"imports"`
	Confirmations int64  `json:"confirmations"`
	Unsubscribes  int64  `json:"unsubscribes"`
	Bounces       int64  `json:"bounces"`
	Complaints    int64  `json:"complaints"`
	Erasures      int64  `json:"erasures"`
}

// TopicCount is how many subscribers have a topic on.
type TopicCount struct {
	Topic string `json:"topic"`
	// Subscribers counts those with the topic on, pending ones too;
	// Active only the active ones (the audience of its next issue).
	Subscribers int64 `json:"subscribers"`
	Active      int64 `json:"active"`
}

// Stats are the console overview's figures, all from counters and
// bitmaps: they cost the same with ten subscribers or a million.
type Stats struct {
	ByStatus map[Status]int64 `json:"by_status"`
	ByTopic  []TopicCount     `json:"by_topic"`
	// Days are the last days' counters, oldest first, today last.
	Days []DayCount `json:"days"`
}

// MaxStatsDays is how many days Stats can give (the counters are kept a
// little longer).
const MaxStatsDays = 90

// Statuses are every status, in the order the console shows them.
var Statuses = []Status{Pending, Active, Unsubscribed, Bounced, Complained}

// Valid tells one of the statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// ErrBadQuery: a list query the store cannot answer (an unknown status
// or topic, a limit out of bounds).
var ErrBadQuery = errors.New("bad subscriber query")

// People is the store's side of the publisher's console and of personal
// data requests (GDPR Art. 15 and 17).
type People interface {
	// ListSubscribers gives a page of subscribers with q's status and
	// topic, in id order after q.After (keyset paging: each page costs
	// the same however deep). Bad status, topic or limit: ErrBadQuery.
	ListSubscribers(ctx context.Context, q SubscriberQuery) (SubscriberPage, error)
	// PersonalData gathers everything held about the person with that
	// (normalised) address; ErrNotFound when there is none.
	PersonalData(ctx context.Context, email string) (PersonalData, error)
	// Erase forgets the person with that address: the record, its index
	// entry, topics, consent, history, onboarding state, push
	// subscriptions, suppression entries, mail allowances and the named
	// outbox entries (their pending tasks), all in one step. Only the
	// address's keyed hash stays (WithErasure), so an import skips it
	// (ErrErased) while the person's own signup and confirmation bring
	// them back. Answers the subscriber as it was; ErrNotFound when
	// unknown.
	Erase(ctx context.Context, email string, outbox ...string) (Subscriber, error)
	// Stats counts the subscribers by status and topic and gives the
	// last days' counters (at most MaxStatsDays).
	Stats(ctx context.Context, days int) (Stats, error)
	// StatsAndGrowth is Stats and Growth in one read.
	StatsAndGrowth(ctx context.Context, days int) (Stats, []TopicGrowth, error)
	// Growth is every topic's new active subscriptions per day by
	// source, over the last days (at most MaxStatsDays).
	Growth(ctx context.Context, days int) ([]TopicGrowth, error)
}

// ErasureHash is the keyed hash that stands for an erased address. The
// service passes the log pseudonyms' hash (logredact), keyed from its
// secret, so one person has one pseudonym in logs, audit log and erasures.
type ErasureHash func(email string) string

// defaultErasureHash is for stores built without WithErasure (tests,
// tools): keyed with a constant, so it hides nothing from someone who
// guesses addresses. The service always sets its own.
func defaultErasureHash(email string) string {
	m := hmac.New(sha256.New, []byte("newsletter erased address (unkeyed default)"))
	m.Write([]byte(strings.ToLower(email)))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// WithErasure returns the store marking erased addresses with h (see
// ErasureHash). Changing the key (NEWSLETTER_SECRET) forgets who was
// erased: an import could then bring them back.
func (r *Redis) WithErasure(h ErasureHash) *Redis {
	if h == nil {
		return r
	}
	c := *r
	c.erasure = h
	return &c
}

// PersonalData implements People.
func (r *Redis) PersonalData(ctx context.Context, email string) (PersonalData, error) {
	sub, err := r.Get(ctx, email)
	if err != nil {
		return PersonalData{}, err
	}
	id, sh := strconv.FormatInt(sub.ID, 10), idShard(sub.ID)
	now := r.now()
	p := r.rdb.Pipeline()
	// Shared marks' keys expire 120 days after their last mark: their
	// entries may go then too.
	p.ZRemRangeByScore(ctx, sh.key(sfxSentKeys), "-inf", "("+ms(now.Add(-sharedSentTTL)))
	sharedKeys := p.ZRange(ctx, sh.key(sfxSentKeys), 0, -1)
	consent := p.HGet(ctx, consentKey(sub.ID), id)
	own := p.ZRangeWithScores(ctx, perPersonKey(sfxMailLog, sub.ID), 0, -1)
	fb := p.LRange(ctx, perPersonKey(sfxFeedbackLog, sub.ID), 0, -1)
	soft := p.ZCount(ctx, perPersonKey(sfxSoft, sub.ID), ms(now.Add(-DefaultSoftBounceWindow)), "+inf")
	onboard := p.ZScore(ctx, sh.key(sfxOnboard), id)
	clicks := p.ZRangeWithScores(ctx, perPersonKey(sfxEngPerson, sub.ID), 0, -1)
	if err := pipeErr(p.Exec(ctx)); err != nil {
		return PersonalData{}, fmt.Errorf("personal data of subscriber %d: %w", sub.ID, err)
	}
	out := PersonalData{Subscriber: sub, Suppressed: sub.Status.Suppressed(), Reconfirming: sub.Reconfirming,
		Mails: []SentMail{}, Feedback: []FeedbackEvent{}, Push: []PushSubscription{}}
	out.Consent.ConfirmedAt = sub.ConfirmedAt
	if v := consent.Val(); v != "" {
		out.Consent = decodeConsent(v, out.Consent)
	}
	if mails, err := r.sharedMails(ctx, sub.ID, sharedKeys.Val()); err != nil {
		return PersonalData{}, err
	} else {
		out.Mails = append(out.Mails, mails...)
	}
	for _, z := range own.Val() {
		kind, key, _ := strings.Cut(z.Member.(string), ":")
		out.Mails = append(out.Mails, SentMail{Kind: kind, Key: key, At: time.UnixMilli(int64(z.Score)).UTC()})
	}
	for _, v := range fb.Val() {
		typ, at, _ := strings.Cut(v, recordSep)
		out.Feedback = append(out.Feedback, FeedbackEvent{Type: FeedbackType(typ), At: msTime(at)})
	}
	out.SoftBounces = int(soft.Val())
	out.Clicks = personClicks(clicks.Val())
	if score := onboard.Val(); score > 0 {
		out.OnboardingSince = time.UnixMilli(int64(score)).UTC()
	}
	push, err := r.PushSubscriptions(ctx, sub.ID)
	if err != nil {
		return PersonalData{}, err
	}
	if push != nil {
		out.Push = push
	}
	devices, err := r.DevicesOf(ctx, []int64{sub.ID})
	if err != nil {
		return PersonalData{}, err
	}
	out.Devices = devices[0]
	if out.Devices == nil {
		out.Devices = []Device{}
	}
	phones, err := r.PhonesOf(ctx, []int64{sub.ID})
	if err != nil {
		return PersonalData{}, err
	}
	if phones[0].Number != "" {
		out.Phone = &phones[0]
	}
	chans, err := r.ChannelsOf(ctx, []int64{sub.ID})
	if err != nil {
		return PersonalData{}, err
	}
	out.Channels = chans[0]
	if out.Channels == nil {
		out.Channels = Channels{}
	}
	return out, nil
}

// sharedMails asks each shared mark's bitmap for id's bit, in one round
// trip.
func (r *Redis) sharedMails(ctx context.Context, id int64, keys []string) ([]SentMail, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	p := r.rdb.Pipeline()
	for _, k := range keys {
		// k is a member of sfxSentKeys: the mark's kind:key.
		kind, key, _ := strings.Cut(k, ":")
		p.GetBit(ctx, idShard(id).key(sharedSentSfx(kind, key)), idSlot(id))
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("the mails of subscriber %d: %w", id, err)
	}
	var out []SentMail
	for i, c := range cmds {
		if c.(*redis.IntCmd).Val() == 1 {
			kind, key, _ := strings.Cut(keys[i], ":")
			out = append(out, SentMail{Kind: kind, Key: key})
		}
	}
	return out, nil
}

// eraseScript forgets one person (Erase): everything keyed by their id or
// address goes, and only the address's keyed hash stays.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  today's counters (sfxDay)
//	KEYS[3…6] the mailbox's allowances: confirm cooldown and day, unsubscribe cooldown and day (holdKeys)
//	ARGV[1]  email
//	ARGV[2]  the address's keyed hash
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4…] outbox ids to drop (the person's pending tasks)
//
// Deletes the record, its address index and search index entries, its status and topic
// bits, the topics-known bit, the tags (list and bits) and field values, the consent, the mail and feedback logs,
// the soft bounces, the reconfirmation, the push subscriptions, the
// onboarding and suppression entries, the per-person clicks, the
// allowances and the outbox
// entries; adds the hash to the erased set and counts the day's erasure. The
// shared delivery marks keep the id's bit: an id is never given again,
// and a bit names nobody. Answers 'ok', the id and the record as they
// were, or 'notfound'.
var eraseScript = subscriberScript(`
DAY = KEYS[2]
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
unindex(ARGV[1], id)
searchset(id, r.ixmail, r.ixname, false)
redis.call('SETBIT', statuskey(r[1]), slot(id), 0)
-- The active bit too, whatever the status (statuskey covers it only for
-- an active record): an erased id must be in no audience.
redis.call('SETBIT', ACTIVE, slot(id), 0)
redis.call('HDEL', subkey(id), id)
settopics(id, ARGV[3], '')
forgetextras(id)
redis.call('SETBIT', KNOWN, slot(id), 0)
redis.call('HDEL', consentkey(id), id)
redis.call('DEL', MAILLOG .. id, FBLOG .. id, SOFT .. id, RECONF .. id, PUSH .. id, DEVICES .. id, PHONE .. id, CHANNELS .. id, PHONECODE .. id)
redis.call('DEL', PFX .. '` + sfxEngPerson + `' .. id)
redis.call('SETBIT', CHOSE, slot(id), 0)
redis.call('ZREM', ONBOARD, id)
redis.call('ZREM', SUPP .. 'b', id)
redis.call('ZREM', SUPP .. 'c', id)
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
dropoutbox({unpack(ARGV, 4)})
redis.call('SADD', ERASED, ARGV[2])
count('erase')
return {'ok', id, packrec(r)}
`)

// Erase implements People.
func (r *Redis) Erase(ctx context.Context, email string, outbox ...string) (Subscriber, error) {
	args := []any{email, r.erasure(email), r.tl().all}
	for _, id := range outbox {
		args = append(args, id)
	}
	res, s, err := r.byAddress(ctx, eraseScript, email, func(a string, s shard) []string {
		confirmCool, confirmDay := holdKeys(s, HoldConfirm, email)
		unsubCool, unsubDay := holdKeys(s, HoldUnsubscribe, email)
		return []string{a, r.dayKey(s), confirmCool, confirmDay, unsubCool, unsubDay}
	}, args)
	if err != nil {
		return Subscriber{}, fmt.Errorf("erase a subscriber: %w", err)
	}
	sub, err := decodeResult(res)
	if home := homeShard(email); err == nil && s != home {
		// A subscriber from before the shards, erased in its own shard:
		// its home shard still points to it, and is where an import
		// looks for the erased hash and a signup takes a new id.
		_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			unpointScript.Eval(ctx, p, []string{anchor(home)}, email, sub.ID)
			p.SAdd(ctx, home.key(sfxErased), r.erasure(email))
			return nil
		})
		if err != nil {
			return Subscriber{}, fmt.Errorf("erase a subscriber: %w", err)
		}
	}
	return sub, err
}

// decodeConsent reads a consent record (source SEP requested [SEP reason
// SEP actor]) over c.
func decodeConsent(v string, c Consent) Consent {
	f := strings.SplitN(v, recordSep, 4)
	c.Source = ConsentSource(f[0])
	if len(f) > 1 {
		c.RequestedAt = time36(f[1])
	}
	if len(f) > 3 {
		c.Reason, c.Actor = f[2], f[3]
	}
	return c
}
