package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
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

// The issues' keys: one hash per issue holds its
// status, counters and content (a JSON document, replaced whole on each
// save, the previous one pushed on the versions list).
const (
	keyIssueSeq     = "nl:{pub}:issue:seq"   // counter for issue ids
	keyIssues       = "nl:{pub}:issues"      // zset of issue ids, score = id
	keyIssueSlugs   = "nl:{pub}:issue:slugs" // hash slug -> id
	prefixIssue     = "nl:{pub}:issue:"      // + id: hash doc, slug, status, version, round, send_at, local_time, sent_at, paused_from, trashed_from, trashed_at, cursor, maxcursor, planned, plandone, bounces, complaints
	suffixIssueVers = ":versions"            // + on the issue's key: list of previous docs, the last MaxIssueVersions
	keyArchiveGen   = "nl:{pub}:archive:gen" // counter: grows each time an issue becomes sent, or a sent one is trashed or restored
	keyIssueTrash   = "nl:{pub}:issue:trash" // zset of the trashed issues' ids, score = when trashed (unix ms)
	// The issues' own outbox (the plan tasks their moves call for),
	// beside the subscribers' (outboxes).
	keyIssueOutbox    = "nl:{pub}:outbox"     // hash outbox id -> body
	keyIssueOutboxDue = "nl:{pub}:outbox:due" // zset of outbox ids, score = due (unix ms)
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

// An issue's engagement (engagement.go), counted in aggregate under
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

// FineHours are the first hours after its mail whose engagement is
// counted again in FineBucket buckets: the report charts a send just
// begun by ten minutes, not by one hour of one point.
const FineHours = 6

// FineBucket is the finer buckets' width.
const FineBucket = 10 * time.Minute

// engageKey is an issue's engagement key with suffix sfx.
func engageKey(issue int64, sfx string) string {
	return prefixEngage + strconv.FormatInt(issue, 10) + "}:" + sfx
}

// Building the keys: every key a method hands Redis or a script is made
// here, from the names above, so the layout is read in one file.

// accountKey is account id's hash.
func accountKey(id int64) string { return prefixAccount + strconv.FormatInt(id, 10) }

// recoveryKey is the set of account id's unused recovery codes.
func recoveryKey(id int64) string { return prefixAccountRC + strconv.FormatInt(id, 10) }

// inviteKey is the invite whose token hashes to hash.
func inviteKey(hash string) string { return prefixInvite + hash }

// hashedKey keeps an attacker-chosen string out of the key names (and
// their length bounded).
func hashedKey(prefix, s string) string {
	sum := sha256.Sum256([]byte(s))
	return prefix + hex.EncodeToString(sum[:16])
}

// nameFailKey counts the failed sign-ins in a row for an address.
func nameFailKey(email string) string { return hashedKey(prefixSignInName, email) }

// accountTriesKey counts account id's second-factor tries.
func accountTriesKey(id int64) string { return prefix2FAAccount + strconv.FormatInt(id, 10) }

// clientTriesKey counts a client's second-factor tries.
func clientTriesKey(client string) string { return hashedKey(prefix2FAClient, client) }

// tryKeys are the two counters of a second-factor try.
func tryKeys(id int64, client string) []string {
	return []string{accountTriesKey(id), clientTriesKey(client)}
}

// outcomeKey is the suffix of the shards' bitmaps of the readers of key
// (a period, IssueOutcomeKey) with an outcome.
func outcomeKey(key, outcome string) string { return sfxOutcome + key + ":" + outcome }

// channelsKey is the hash of the channels subscriber id chose per topic.
func channelsKey(id int64) string { return idShard(id).key(sfxChannels + strconv.FormatInt(id, 10)) }

// deviceKey is the hash of subscriber id's devices.
func deviceKey(id int64) string { return idShard(id).key(sfxDevices + strconv.FormatInt(id, 10)) }

// deviceOwnerKey names the one subscriber a token is notified for: its
// newest registrant. It sits in the shard of the device id's hash (a
// token's owner is the token's, whoever gave it, as a number's state is:
// numberKey), so the move from one person to another is a single SET,
// atomic in a Redis Cluster as in one Redis; the people's device hashes,
// each in its own person's shard, follow it (DevicesOf lists a device only
// for its owner, so an old owner's entry not yet deleted is never
// notified). A device stored before the owners were kept has none and is
// listed as before.
func deviceOwnerKey(deviceID string) string {
	sum := sha256.Sum256([]byte(deviceID))
	return shardOfSum(sum[:]).key(sfxDevOwner + deviceID)
}

// feedKey names one feed of one topic: a hash of both, since a URL can be
// long, and the same feed in two topics feeds each once.
func feedKey(topic, url string) string {
	h := sha256.Sum256([]byte(topic + "\n" + url))
	return prefixFeed + hex.EncodeToString(h[:12])
}

// holdKeys are the keys of the allowance of kind for email's mailbox
// (address.Mailbox) in shard s: its cooldown and its count of the day.
// The mailbox is hashed: the keys need not show addresses to whoever
// lists them. They are kept in the mailbox's home shard, but for a
// subscriber from before the shards whose id lives in another, in that
// one, where its scripts run.
func holdKeys(s shard, kind, email string) (cool, day string) {
	sum := mailboxSum(email)
	h := hex.EncodeToString(sum[:12])
	return s.key(sfxHold + kind + ":" + h), s.key(sfxHoldDay + kind + ":" + h)
}

// IssueOutcomeKey is the key under which SetOutcome records an issue's
// skipped and failed readers (beside the digest periods').
func IssueOutcomeKey(id int64) string { return "issue:" + strconv.FormatInt(id, 10) }

// sharedSentSfx is the suffix of the shards' bitmaps of the readers a
// shared mark of kind and key was sent to (markKeys).
func sharedSentSfx(kind, key string) string { return sfxSent + kind + ":" + key }

// issueMarkKeys are the suffixes of the shards' bitmaps of an issue's
// readers sent, skipped and failed.
func issueMarkKeys(id int64) []string {
	key := IssueOutcomeKey(id)
	return []string{sharedSentSfx(IssueMarkKind, strconv.FormatInt(id, 10)), outcomeKey(key, OutcomeSkipped), outcomeKey(key, OutcomeFailed)}
}

// issueKey is issue id's hash.
func issueKey(id int64) string { return prefixIssue + strconv.FormatInt(id, 10) }

// itemsKey is the zset of topic's item ids. The digest's is the one it
// always was, so items stored before topics had items are the digest's.
func itemsKey(topic string) string {
	if topic == topics.Digest || topic == "" {
		return keyItems
	}
	return prefixItems + topic
}

// markKeys are a mark's sent key (a bitmap by idSlot for shared marks)
// and its claim: a hash of claims for shared marks, a key of its own
// otherwise; both in the subscriber's shard.
func markKeys(m Mark) (sent, claim string) {
	s, base := idShard(m.SubscriberID), m.Kind+":"+m.Key
	if m.Shared {
		return s.key(sharedSentSfx(m.Kind, m.Key)), s.key(sfxClaims + base)
	}
	id := strconv.FormatInt(m.SubscriberID, 10)
	return s.key(sfxSent + base + ":" + id), s.key(sfxClaim + base + ":" + id)
}

// orderKey is subscriber id's queue of events waiting on channel.
func orderKey(id int64, channel string) string {
	return idShard(id).key(sfxOrder + channel + ":" + strconv.FormatInt(id, 10))
}

// statusBitmap is the suffix of the shards' bitmap of the subscribers
// with status st.
func statusBitmap(st Status) string {
	if st == Active {
		return sfxActive
	}
	return sfxStatus + codeByStatus[st]
}

// consentKey is the hash that holds subscriber id's consent.
func consentKey(id int64) string {
	return idShard(id).key(sfxConsent + strconv.FormatInt(idSlot(id)/subsPerBucket, 10))
}

// phoneKey is the hash of subscriber id's number.
func phoneKey(id int64) string { return idShard(id).key(sfxPhone + strconv.FormatInt(id, 10)) }

// numberKey is a number's state, in the shard of its hash: the state is
// the number's, whoever gave it.
func numberKey(number string) string {
	sum := sha256.Sum256([]byte(number))
	return shardOfSum(sum[:]).key(sfxNumber + number)
}

// keySMSDay counts the texts of a day (+ YYYY-MM-DD, UTC) in all: the
// service's cap (TakeSMSAllowance). Its own slot: one INCR a text.
const keySMSDay = "nl:sms:day:"

// smsDayKey is the count of every text of day (YYYY-MM-DD, UTC).
func smsDayKey(day string) string { return keySMSDay + day }

// numberDayKey counts the texts of a day to one number, beside its state.
func numberDayKey(number, day string) string {
	sum := sha256.Sum256([]byte(number))
	return shardOfSum(sum[:]).key(sfxNumber + "day:" + day + ":" + number)
}

// phoneCodeKey is subscriber id's code waiting to be typed.
func phoneCodeKey(id int64) string { return idShard(id).key(sfxPhoneCode + strconv.FormatInt(id, 10)) }

// prefixEventKey is an Idempotency-Key of POST /api/events (eventkeys.go)
// + a hash of who sent it and the key: a hash whose fields are read by its
// scripts (EventKeyTTL). No hash tag: each script takes one key, so the
// keys spread over a cluster's slots.
const prefixEventKey = "nl:idem:ev:"

// eventKeyKey is the Idempotency-Key key of scope (the principal) and
// key, hashed: a client's key names no Redis key, is bounded in length,
// and another scope's same key is another key. NUL is in neither a
// principal's name nor a key, so the pair reads one way only.
func eventKeyKey(scope, key string) string { return hashedKey(prefixEventKey, scope+"\x00"+key) }

// keySMSCallback is a gateway callback acted on (+ its message SID and
// what it said), kept for the replay window.
const keySMSCallback = "nl:sms:callback:"

// smsCallbackKey is the mark of a gateway callback acted on (key: its
// message SID and what it said).
func smsCallbackKey(key string) string { return keySMSCallback + key }

// pushKey is the hash of subscriber id's browsers for web push.
func pushKey(id int64) string { return idShard(id).key(sfxPush + strconv.FormatInt(id, 10)) }

// dayKey is the key of shard s's counters of today.
func (r *Redis) dayKey(s shard) string { return dayKeyOf(s, r.now().UTC().Format(time.DateOnly)) }

// dayKeyOf is the key of shard s's counters of day (YYYY-MM-DD, UTC).
func dayKeyOf(s shard, day string) string { return s.key(sfxDay + day) }

// prefix is what every key of the shard begins with.
func (s shard) prefix() string { return fmt.Sprintf("nl:{s%02d}:", int(s)) }

// key is the shard's key for suffix (one of the sfx constants of keys.go,
// with its own suffix after it where it takes one).
func (s shard) key(suffix string) string { return s.prefix() + suffix }

// anchor is the KEYS[1] of a subscriber script run in s: the scripts take
// their shard from it (subscriberLua). It is the shard's id counter,
// which tells a script run by address that the shard is the address's
// home; visit is the one for a shard an index pointed to.
func anchor(s shard) string { return s.key(sfxSeq) }

// visit is anchor for a script run by address in a shard that is not the
// address's home (byAddress). Nothing is stored under it.
func visit(s shard) string { return s.key(sfxVisit) }

// bucketKey is the hash that holds id's value of a per-person store
// packed as the records are (sfx: sfxTagList, sfxFieldValues).
func bucketKey(sfx string, id int64) string {
	return idShard(id).key(sfx + strconv.FormatInt(idSlot(id)/subsPerBucket, 10))
}

// webhookKey is endpoint id's hash.
func webhookKey(id string) string { return prefixWebhook + id }

// webhookDeliveriesKey is the list of endpoint id's last deliveries.
func webhookDeliveriesKey(id string) string { return prefixWebhookLog + id }

// runKey is the digest run of period's hash.
func runKey(period string) string { return prefixRun + period }

// itemKey is the hash of the item whose id reads id.
func itemKey(id string) string { return prefixItem + id }

// issueKeyOf is issueKey for an id as the issues' zset holds it.
func issueKeyOf(id string) string { return prefixIssue + id }

// eventEngageKey holds the engagement id of event eventID.
func eventEngageKey(eventID string) string { return prefixEventEngage + eventID }

// linkReadersSfx is the engagement suffix (engageKey) of the readers who
// clicked link index i.
func linkReadersSfx(i int) string { return sfxEngLink + strconv.Itoa(i) }

// topicSfx is the suffix of the shards' bitmaps of topic's subscribers.
func topicSfx(topic string) string { return sfxTopic + topic }

// tagSfx is the suffix of the shards' bitmaps of the people with tag.
func tagSfx(tag string) string { return sfxTag + tag }

// perPersonKey is subscriber id's key of a store kept one key a person
// (sfx: sfxMailLog, sfxFeedbackLog, sfxSoft, sfxEngPerson), in their shard.
func perPersonKey(sfx string, id int64) string {
	return idShard(id).key(sfx + strconv.FormatInt(id, 10))
}

// suppKey is shard s's list of the subscribers suppressed with status code
// c (b or c).
func suppKey(s shard, c string) string { return s.key(sfxSupp + c) }

// leftByKey is shard s's bitmap of who left through issue's links.
func leftByKey(s shard, issue int64) string { return s.key(sfxLeftBy + strconv.FormatInt(issue, 10)) }

// asynqServers is asynq's sorted set of the running servers, scored by
// when their last report expires (unix seconds).
const asynqServers = "asynq:servers"
