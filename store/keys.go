package store

import "time"

// The Redis keys. One hash per subscriber keeps memory near 150 bytes each;
// the active set is a sorted set scored by id, so the digest walks it by
// keyset (id > cursor) in pages of any size.
const (
	keyEmailIndex = "nl:email"      // hash email -> id
	keySeq        = "nl:seq"        // counter for subscriber ids
	keyActive     = "nl:active"     // zset of active ids, score = id
	keyOutbox     = "nl:outbox"     // hash outbox id -> body
	keyOutboxDue  = "nl:outbox:due" // zset of outbox ids, score = due (unix ms)
	prefixSub     = "nl:sub:"       // + id: the subscriber hash, fields below
	prefixSent    = "nl:sent:"      // + kind:key[:id]: a sent mark (markKeys)
	prefixClaim   = "nl:claim:"     // + kind:key:id: a claim with an expiry

	keyItemSeq    = "nl:item:seq"        // counter for item ids
	keyItems      = "nl:items"           // zset of item ids, score = id
	prefixItem    = "nl:item:"           // + id: item hash t, u, s, p
	prefixRun     = "nl:digest:"         // + period: the run hash
	keyLastItem   = "nl:digest:lastitem" // highest item id any run took
	keyLatestRun  = "nl:digest:latest"   // period of the latest run
	prefixOutcome = "nl:digest:outcome:" // + period:outcome: bitmap of ids
)

// The subscriber hash's fields. Short names, because at a million
// subscribers every byte of a field name is a megabyte.
//
//	id  subscriber id
//	e   address
//	n   name (absent when none)
//	tz  IANA time zone (absent when none)
//	s   status: pending, active, unsubscribed, bounced
//	c   created, unix ms
//	cf  confirmed, unix ms (absent while pending)
//	u   unsubscribed or bounced, unix ms (absent while the subscription runs)

// How long delivery marks are kept. Per-key marks (confirm nonce, event
// bundle) only need to outlive every retry of their task; period bitmaps
// outlive the period by far.
const (
	sentTTL       = 30 * 24 * time.Hour
	sharedSentTTL = 120 * 24 * time.Hour
)
