package store

import (
	"strconv"
	"time"
)

// The Redis keys, layout 4. The subscribers are spread over Shards
// logical shards (shard.go): every key of theirs is a shard's, named
// shard.key(suffix) ("nl:{sNN}:" + suffix), its hash tag keeping the
// shard in one Redis Cluster slot. Within a shard, subscribers are packed
// into small hashes that Redis keeps in its compact listpack encoding, the
// address index holds a 48-bit hash of the address instead of the
// address, and the statuses and topics are bitmaps indexed by idSlot (an
// id divided by Shards). Global figures are sums over the shards; walks
// read every shard's bitmaps side by side, in id order.
//
// The publisher's content (issues, runs, items, feeds) lives under the
// tag {pub}, the stored tokens under {tok}, the webhook endpoints under
// {wh}: slots of their own, apart from the subscribers'.
const (
	keySchema     = "nl:schema"      // the layout version, Layout; start-up checks it (version.go)
	keySuppFilled = "nl:supp:filled" // set by an earlier release once it put the subscribers bounced before the lists on them; start-up stamps it on an empty Redis (version.go)

	// Keys of older layouts, never written now: their presence tells
	// start-up that the data is older than this layout (version.go).
	v3Seq        = "nl:seq"    // layout 3's (and 2's) subscriber id counter, set once any subscriber was written
	v1EmailIndex = "nl:email"  // layout 1's hash email -> id
	v1Active     = "nl:active" // layout 1's zset of active ids

	// A shard's keys (shard.key(sfx…)). The record: see below.
	sfxSeq     = "seq"    // counter: the shard's n-th id is n*Shards + the shard (newIDLua); also the anchor every shard script is given
	sfxVisit   = "visit"  // the anchor of a script sent to the shard by another's index (visit); never stored
	sfxSubs    = "s:"     // + idSlot/64: hash id -> packed subscriber record (below)
	sfxIndex   = "ix:"    // + indexBuckets' bucket of sha1(address): hash 48 more bits of it -> id[,id…] (the address's home shard; an id of another shard is a pointer, byAddress)
	sfxActive  = "act"    // bitmap: bit idSlot set while the subscriber is active
	sfxOutbox  = "outbox" // hash outbox id -> body, the mails the shard's scripts called for
	sfxDue     = "outbox:due"
	sfxSent    = "sent:"       // + kind:key: a bitmap by idSlot (shared marks); + kind:key:id: a string
	sfxClaim   = "claim:"      // + kind:key:id: a claim string with an expiry (other marks)
	sfxClaims  = "claims:"     // + kind:key: hash id -> claim expiry, unix ms (shared marks)
	sfxSupp    = "supp:"       // + status code b or c: zset of suppressed ids, score = id
	sfxSoft    = "soft:"       // + id: zset of soft-bounce report ids, score = unix ms (30 days)
	sfxSeen    = "fbseen:"     // + report id: a bounce or complaint report already applied (30 days)
	sfxOutcome = "outcome:"    // + kind:key:outcome (a digest's period, an issue): bitmap by idSlot of those skipped or failed
	sfxLeftBy  = "left:issue:" // + issue id: bitmap by idSlot of those who left through that issue's unsubscribe or preferences links (sharedSentTTL)

	// A subscriber's topics are one bit per topic (1 MB holds a million
	// subscribers' choice of eight topics): the digest's audience walk
	// reads its topic's bitmap beside the active one, a batch's stretch
	// at a time.
	sfxTopic        = "t:"         // + topic id: bitmap, bit idSlot set while the subscriber has the topic on
	sfxKnown        = "tknown"     // bitmap: bit idSlot set once the subscriber's topics were written
	keyTopicsFilled = "nl:tfilled" // set by an earlier release once it gave the subscribers from before topics the default ones; start-up stamps it on an empty Redis (version.go)

	// The onboarding sequence: who confirmed lately (so a step added to
	// the file reaches them), and which sequence the waiting steps follow.
	sfxOnboard     = "onboard"       // zset of ids that confirmed with a first step scheduled, score = confirmed (unix ms)
	keySequenceVer = "nl:seqversion" // the fingerprint of the sequence the waiting steps were scheduled by

	// A subscriber's browsers for web push (push.go): one hash per
	// subscriber, deleted when the person leaves.
	sfxPush      = "push:"      // + id: hash endpoint -> "seq created-ms p256dh auth"
	sfxDevices   = "dev:"       // + id: hash device id -> "seq created-ms platform token" (devices.go)
	sfxDevOwner  = "devowner:"  // + device id, in the shard of the id's hash: the subscriber id whose device it is, its newest registrant (devices.go)
	sfxPhone     = "phone:"     // + id: hash number, source, at: the person's number for SMS and its consent (phones.go)
	sfxChannels  = "chan:"      // + id: hash topic -> the channels chosen for it, comma-separated (channels.go)
	sfxChose     = "chose"      // bitmap: bit idSlot set once the subscriber chose channels for a topic
	sfxOrder     = "order:"     // + channel:id: zset event key -> posted (unix ms), the person's events waiting on that channel (order.go)
	sfxPhoneCode = "phonecode:" // + id: hash number, code (hashed), at, tries, sid (once the gateway took its text): a number the person gave waiting for its texted code (10 minutes)
	sfxNumber    = "num:"       // + E.164 number, in the shard of the number's hash: "stopped" or "retired" (no key: on)

	// A person's tags (tags.go): one bitmap per tag, so a segment reads
	// a tag as it reads a topic, and the person's list beside their
	// record (packed subsPerBucket to a hash, as the records are), so a
	// record is read with its tags without asking every tag's bitmap.
	sfxTag     = "tag:" // + tag: bitmap, bit idSlot set while the subscriber has the tag
	sfxTagList = "tg:"  // + idSlot/64: hash id -> the subscriber's tags, sorted, comma-separated
	// A person's custom field values (fields.go), packed as the tags:
	// name SEP value SEP name SEP value…, names sorted.
	sfxFieldValues = "fv:" // + idSlot/64: hash id -> packed field values
	// When each day's first subscriber of the shard was made: ids grow
	// with time within a shard, so "joined after a day" is "slot at or
	// past that day's first" (segments.go) with no record read.
	sfxJoinDay = "jday" // hash YYYY-MM-DD (UTC) -> the idSlot of the shard's first subscriber made that day

	// The publisher's declarations of tags, fields and segments.
	keyTags        = "nl:{pub}:tags"          // set: every tag ever given to someone (the console's list, a segment's check)
	keyFields      = "nl:{pub}:fields"        // hash field name -> JSON FieldDef
	keySegmentSeq  = "nl:{pub}:segment:seq"   // counter for segment ids
	keySegments    = "nl:{pub}:segments"      // hash id -> JSON Segment
	keySegmentName = "nl:{pub}:segment:names" // hash name -> id

	keyItemSeq   = "nl:{pub}:item:seq"        // counter for item ids
	keyItems     = "nl:{pub}:items"           // zset of the digest topic's item ids, score = id
	prefixItems  = "nl:{pub}:items:"          // + topic other than digest: zset of its item ids, score = id
	prefixItem   = "nl:{pub}:item:"           // + id: item hash t, u, s, p, tp (topic; absent: digest)
	prefixFeed   = "nl:{pub}:feed:"           // + feedKey(topic, url): hash reg, etag, lm, base, day, dayn; + sfxFeed…: its zsets below
	sfxFeedSeen  = ":seen"                    // on a feed's key: zset of entry ids, score = last seen (unix ms)
	sfxFeedWait  = ":wait"                    // on a feed's key (mode each): zset of the issue ids of entries waiting for a day's room, score = id
	sfxFeedOut   = ":out"                     // on a feed's key (mode each): zset of the issue ids let out (counted in their day), to send, score = id
	prefixRun    = "nl:{pub}:digest:"         // + period: the run hash
	keyLastItem  = "nl:{pub}:digest:lastitem" // highest item id any run took
	keyLatestRun = "nl:{pub}:digest:latest"   // period of the latest run
	keySettings  = "nl:{pub}:settings"        // hash: the newsletter's settings (settings.go) and their version v
	// The topics, the sequence and the templates written at run time
	// (catalog.go), and their saved versions.
	keyCatalog = "nl:{pub}:catalog" // hash v, doc (topics JSON), gen, t:NAME (template JSON), tv:NAME (its version)
	// keyLegacyServiceTopics is where a role of a release before the
	// catalog recorded the topics it ran with (JSON list): read once, as
	// the first import's topics (LegacyServiceTopics).
	keyLegacyServiceTopics = "nl:topics"
	keyCatalogHistory      = "nl:{pub}:catalog:history" // list of CatalogChange JSON, newest first
)

// The per-mailbox allowances (MailHolds), keyed on a hash of
// address.Mailbox in the mailbox's home shard, so victim+1@… and victim@…
// count together.
const (
	sfxHold    = "mhold:"     // + kind:hash: a mail of kind went to the mailbox within the cooldown (expires with it)
	sfxHoldDay = "mhold:day:" // + kind:hash: mails of kind to the mailbox in the last day
	// A suppressed subscriber whose confirmation someone asked for
	// (ReconfirmWindow): "1" SEP name SEP time zone SEP topics, applied by
	// the confirmation; "" once cancelled (the address left or bounced
	// again), which still holds the window.
	sfxReconfirm = "reconfirm:" // + id
)

// subsPerBucket is how many subscribers share one hash. Redis keeps a hash
// in listpack encoding up to hash-max-listpack-entries fields (512 by
// default in Redis 7) of at most hash-max-listpack-value bytes (64): 64
// records of about 60 bytes stay well inside, at a cost of a few bytes
// each.
const subsPerBucket = 64

// indexBuckets is how many hashes a shard's address index is spread over.
// Each stays a listpack (at most hash-max-listpack-entries, 512, entries
// of a few bytes) up to 512 × 512 × Shards, some 16.8 million
// subscribers; past that a bucket becomes a hash table, three times the
// bytes an entry (bench-scale measured it with 256 a shard, where it came
// at 8.4 million). Raise hash-max-listpack-entries for more.
const indexBuckets = 512

// The subscriber record, one hash value: seven fields joined by recordSep
// (the ASCII unit separator, which no field may contain).
//
//	1 status     p pending, a active, u unsubscribed, b bounced, c complained
//	2 created    unix ms, base 36
//	3 confirmed  unix ms, base 36; empty while pending
//	4 ended      unix ms, base 36; empty while the subscription runs
//	5 address
//	6 name       may be empty
//	7 time zone  IANA name; may be empty
const recordSep = "\x1f"

// How long delivery marks are kept. Per-key marks (confirm nonce, event
// bundle) only need to outlive every retry of their task; period bitmaps
// outlive the period by far.
const (
	sentTTL       = 30 * 24 * time.Hour
	sharedSentTTL = 120 * 24 * time.Hour
)

// The outgoing webhook endpoints (webhooks.go): a sorted set of ids by
// creation, and a hash per endpoint with the fields url, events
// (comma-separated), secret, state (active, disabled), failures (in a row),
// since (the first of them), disabled and created (times in unix ms; since
// and disabled absent when zero).
const (
	keyWebhooks   = "nl:{wh}"    // zset of endpoint ids, score = created (unix ms)
	prefixWebhook = "nl:{wh}:e:" // + id: the endpoint's hash
	// + id: list of the endpoint's last deliveries (JSON, newest first,
	// at most MaxWebhookDeliveries)
	prefixWebhookLog = "nl:{wh}:d:"
)

// The stored tokens (tokens.go): two hashes kept together by its scripts.
const (
	keyTokens     = "nl:{tok}"      // hash sha256(token) -> role SEP created (unix ms, base 36) SEP name
	keyTokenNames = "nl:{tok}:name" // hash name -> sha256(token)
)

// The audit log (audit.go): a stream of entries with the fields at (unix
// ms), actor, role, action, target and detail; trimmed to about
// audit.MaxEntries.
const keyAudit = "nl:audit"

// The people's side (people.go): indexes that list subscribers by status
// without reading every record, each person's consent and history, the
// erased addresses, and the daily counters of the console's overview.
const (
	// One bitmap per status besides the active one (sfxActive): bit
	// idSlot is set while the subscriber has that status. The scripts'
	// save() keeps them, so every status change moves one bit.
	sfxStatus       = "st:"          // + status code p, u, b or c
	keyStatusFilled = "nl:st:filled" // set by an earlier release once it put the subscribers from before them in the bitmaps; start-up stamps it on an empty Redis (version.go)
	// The consent record of each subscription, packed as the subscribers
	// are (subsPerBucket to a hash): how the person came in and when
	// they asked. The confirmation time is the record's.
	sfxConsent = "cs:" // + idSlot/64: hash id -> source SEP requested (unix ms, base 36)
	// The shared delivery marks' keys (a digest period, an issue, a
	// sequence step), so a person's mails are found by asking each key's
	// bitmap for their bit, never by listing keys.
	sfxSentKeys = "sentkeys" // zset of "kind:key", score = last marked (unix ms); keyless marks score sentKeyForever
	// Each subscriber's own marks (confirmations, unsubscribe links,
	// event bundles): they are keys of their own named by a nonce, so
	// the person's list of them is kept beside (capped, expiring as the
	// marks do).
	sfxMailLog = "ml:" // + id: zset of "kind:key", score = sent (unix ms)
	// Each subscriber's bounce and complaint reports, newest first.
	sfxFeedbackLog = "fbh:" // + id: list of "type SEP unix ms" (capped)
	// The keyed hashes of erased addresses (in the address's home
	// shard): an import skips them; the person's own confirmation takes
	// theirs off.
	sfxErased = "erased" // set of keyed hashes (WithErasure)
	// The overview's daily counters, kept dayCounterTTL; the day's
	// figure is the sum over the shards.
	sfxDay = "day:" // + YYYY-MM-DD (UTC): hash signup, import, confirm, unsubscribe, bounce, complaint, erase -> count
	// Stats ANDs each topic with the active bitmap here, inside one script.
	sfxScratch = "scratch"
	// The search index (search.go): a zset whose members, all scored 0,
	// are a lowercased key (the address, the name, each of the name's
	// words) NUL the id, so ZRANGEBYLEX finds people by the beginning of
	// their address or name. save() in every subscriber script keeps it;
	// erase takes the person's entries off.
	sfxSearch = "q"
	// Set once start-up put the subscribers written before the index in
	// it (fillSearch); until then a search may miss them.
	keySearchFilled = "nl:q:filled"
)

// Caps and lifetimes of the people's keys.
const (
	mailLogCap     = 50
	feedbackLogCap = 50
	dayCounterTTL  = 100 * 24 * time.Hour // the overview shows 90 days
	sentKeyForever = 1 << 52              // the score of a keyless shared mark's key: it never expires
)

// The console's accounts (accounts.go): people who sign in with an
// address, a password and a TOTP code, under the tag {acct}, a slot of
// their own. Secrets are kept only as hashes (argon2id for passwords,
// SHA-256 for invite tokens and recovery codes); the TOTP secret is kept
// as it is (checking a code needs it), like the webhooks' secrets.
const (
	keyAccountSeq    = "nl:{acct}:seq"     // counter for account ids
	keyAccounts      = "nl:{acct}:ids"     // zset of account ids, score = created (unix ms)
	keyAccountEmails = "nl:{acct}:email"   // hash normalised address -> account id
	prefixAccount    = "nl:{acct}:a:"      // + id: hash email, role, pw, totp, step, pend, created, last, susp, gen, by (fails, failat: before failures were counted by address, unread)
	prefixAccountRC  = "nl:{acct}:rc:"     // + id: set of the SHA-256 of the unused recovery codes
	keyInvites       = "nl:{acct}:invites" // zset of invite hashes, score = expiry (unix ms)
	prefixInvite     = "nl:{acct}:inv:"    // + SHA-256 of the token: hash email, role, by, exp, totp, revoked, revokedby (expires with the invite)
	prefixSignInName = "nl:{acct}:fn:"     // + SHA-256 of an attempted address (128 bits): its failed sign-ins in a row (expires NameFailuresTTL after the last)
	prefix2FAAccount = "nl:{acct}:2fa:"    // + account id: second-factor tries in the window (expires SecondFactorWindow after the first)
	prefix2FAClient  = "nl:{acct}:2fc:"    // + SHA-256 of a client's key (128 bits): its second-factor tries in the window
)

// An issue's engagement (engagement_redis.go), counted in aggregate under
// a hash tag of the issue's own, {eID}: one issue's counters share a slot
// (its flush is one script), and the issues spread over the cluster. The
// readers behind the unique counts are HyperLogLogs of a keyed hash of
// their id, never the id.
const (
	prefixEngage = "nl:{e" // + issue id + "}:" + one of the suffixes below (engageKey)
	sfxEngCounts = "n"     // hash: c:INDEX clicks, m:INDEX machine clicks, o opens, mo machine opens
	sfxEngHours  = "h"     // hash: UNIXHOUR:c|m|o|mo -> count (engagementHours after the mail at most)
	sfxEngAll    = "u"     // HyperLogLog: every reader who clicked a link of the issue
	sfxEngLink   = "u:"    // + INDEX: HyperLogLog, the readers who clicked that link
	sfxEngOpen   = "ou"    // HyperLogLog: the readers who opened it (people's opens only)
	sfxEngLinks  = "links" // list: the issue's link targets by index, written by the worker that renders it

	// A topic event's engagement id (EventEngagement): taken once from
	// the issues' counter (keyIssueSeq), so an event's counts live under
	// an {eID} of their own that no issue has, and kept long enough for
	// every retry of the event's fan-out to find it.
	prefixEventEngage = "nl:{pub}:event:eng:" // + event id: string, the engagement id (eventEngagementTTL)

	// NEWSLETTER_ENGAGEMENT=per-person only: a person's clicks, in their
	// shard, kept the stated days (the member's time is its score).
	sfxEngPerson = "eng:" // + id: zset "issue:index:ms" (personClickMember) -> clicked (unix ms)
)

// EngagementHours is how many hours after its mail an issue's hourly
// counts run (the report's chart); later clicks count in the totals only.
const EngagementHours = 14 * 24

// engageKey is an issue's engagement key with suffix sfx.
func engageKey(issue int64, sfx string) string {
	return prefixEngage + strconv.FormatInt(issue, 10) + "}:" + sfx
}
