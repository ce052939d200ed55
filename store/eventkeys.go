package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Idempotency-Keys of POST /api/events (issue #45): a client that
// retries an event after a timeout or a 503 names it with the same key,
// and the retry answers the first event's id instead of queueing a second.
//
// A key is reserved before the event is queued, as pending under this
// request's owner nonce with a short lease and the event id the request
// will queue, then finished with the answer (kept EventKeyTTL) or let go
// (a failure: the lease ends at once, so a retry goes ahead). A pending
// key whose lease is up is taken over by the next request with the same
// body, under the SAME event id: the fan-out's TaskID (kept a day) makes
// queueing it again a conflict, so a holder that queued the event and died
// before finishing the key still makes one event, not two.

// EventKeyTTL is how long an event's Idempotency-Key answers the first
// event (from the first answer; a pending key from its reservation).
const EventKeyTTL = 24 * time.Hour

// EventKeyLease is how long a pending key holds off another request with
// the same key (409) before that request may take it over: more than the
// subscriber read and the enqueue take between the two scripts.
const EventKeyLease = 10 * time.Second

// EventKeys keep the Idempotency-Keys of POST /api/events.
type EventKeys interface {
	// ReserveEventKey reserves k.Key for k.Scope, or says who holds it.
	ReserveEventKey(ctx context.Context, k EventKey) (EventKeyState, error)
	// FinishEventKey stores the answer of the request that reserved k
	// (code and the answer's JSON) for EventKeyTTL. It answers false
	// when k's owner no longer holds it (its lease was taken over).
	FinishEventKey(ctx context.Context, k EventKey, code int, answer []byte) (bool, error)
	// ReleaseEventKey lets k go after a failure: its lease ends now, so
	// the next request with the key and body goes ahead (under the same
	// event id). A key k's owner does not hold is left as it is.
	ReleaseEventKey(ctx context.Context, k EventKey) error
}

// EventKey is one request's Idempotency-Key.
type EventKey struct {
	Scope string // who sent it (the principal's name): one client's key never reaches another's event
	Key   string // the header's value, checked by the caller
	Sum   string // a hash of the request's body: the key is bound to it
	Owner string // this request's nonce
	// EventID is the id this request gives the event if the key is new.
	EventID string
}

// EventKeyOutcome is what ReserveEventKey found.
type EventKeyOutcome int

const (
	// KeyReserved: the request holds the key; it queues the event under
	// EventKeyState.EventID.
	KeyReserved EventKeyOutcome = iota
	// KeyAnswered: the key's request was answered; its answer is the one.
	KeyAnswered
	// KeyBusy: another request holds the key, its lease not up.
	KeyBusy
	// KeyOtherRequest: the key was used with another body.
	KeyOtherRequest
)

// EventKeyState is ReserveEventKey's answer.
type EventKeyState struct {
	Outcome EventKeyOutcome
	EventID string // KeyReserved: the event's id (a lapsed holder's, when taken over)
	Code    int    // KeyAnswered: the first answer's status
	Answer  []byte // KeyAnswered: the first answer's JSON
}

// reserveEventKeyScript reserves an Idempotency-Key: one hash, fields st
// (p pending, d done), sum, own, id, lease (unix ms; pending only), code
// and body (done only).
//
//	KEYS[1]  eventKeyKey(scope, key)
//	ARGV[1]  the body's sum
//	ARGV[2]  the owner nonce
//	ARGV[3]  the event id, if the key is new
//	ARGV[4]  now (unix ms)
//	ARGV[5]  the lease's end (unix ms)
//	ARGV[6]  EventKeyTTL (ms)
//
// Answers {'new', id}, {'done', code, body}, {'busy'} or {'other'}. The
// owner's own call sent again (go-redis resends after a timeout) answers
// 'new' again, with the id it reserved.
var reserveEventKeyScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'st', 'sum', 'own', 'id', 'lease', 'code', 'body')
if not v[1] then
  redis.call('HSET', KEYS[1], 'st', 'p', 'sum', ARGV[1], 'own', ARGV[2], 'id', ARGV[3], 'lease', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  return {'new', ARGV[3]}
end
if v[2] ~= ARGV[1] then return {'other'} end
if v[1] == 'd' then return {'done', v[6], v[7]} end
if v[3] == ARGV[2] then return {'new', v[4]} end
if tonumber(v[5]) > tonumber(ARGV[4]) then return {'busy'} end
redis.call('HSET', KEYS[1], 'own', ARGV[2], 'lease', ARGV[5])
return {'new', v[4]}
`)

// ReserveEventKey implements EventKeys.
func (r *Redis) ReserveEventKey(ctx context.Context, k EventKey) (EventKeyState, error) {
	now := r.now()
	res, err := reserveEventKeyScript.Run(ctx, r.rdb, []string{eventKeyKey(k.Scope, k.Key)}, k.Sum, k.Owner, k.EventID,
		now.UnixMilli(), now.Add(EventKeyLease).UnixMilli(), EventKeyTTL.Milliseconds()).StringSlice()
	if err != nil {
		return EventKeyState{}, fmt.Errorf("reserve an event's idempotency key: %w", err)
	}
	switch {
	case len(res) == 2 && res[0] == "new":
		return EventKeyState{Outcome: KeyReserved, EventID: res[1]}, nil
	case len(res) == 3 && res[0] == "done":
		code, err := strconv.Atoi(res[1])
		if err != nil {
			return EventKeyState{}, fmt.Errorf("an event's idempotency key: stored status %q", res[1])
		}
		return EventKeyState{Outcome: KeyAnswered, Code: code, Answer: []byte(res[2])}, nil
	case len(res) == 1 && res[0] == "busy":
		return EventKeyState{Outcome: KeyBusy}, nil
	case len(res) == 1 && res[0] == "other":
		return EventKeyState{Outcome: KeyOtherRequest}, nil
	}
	return EventKeyState{}, fmt.Errorf("reserve an event's idempotency key: answer %q", res)
}

// finishEventKeyScript stores the answer of a reserved key.
//
//	KEYS[1]  eventKeyKey(scope, key)
//	ARGV[1]  the owner nonce
//	ARGV[2]  the answer's status code
//	ARGV[3]  the answer's JSON
//	ARGV[4]  EventKeyTTL (ms)
//
// Answers 1, or 0 when the owner does not hold the key (taken over).
var finishEventKeyScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'st', 'own')
if v[2] ~= ARGV[1] then return 0 end
if v[1] == 'd' then return 1 end
redis.call('HSET', KEYS[1], 'st', 'd', 'code', ARGV[2], 'body', ARGV[3])
redis.call('HDEL', KEYS[1], 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// FinishEventKey implements EventKeys.
func (r *Redis) FinishEventKey(ctx context.Context, k EventKey, code int, answer []byte) (bool, error) {
	n, err := finishEventKeyScript.Run(ctx, r.rdb, []string{eventKeyKey(k.Scope, k.Key)}, k.Owner, code, answer, EventKeyTTL.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("finish an event's idempotency key: %w", err)
	}
	return n == 1, nil
}

// releaseEventKeyScript ends a pending key's lease now. The key keeps
// its event id and body's sum: the failed request may have queued the
// event after all (a timeout), and the retry must queue that one.
//
//	KEYS[1]  eventKeyKey(scope, key)
//	ARGV[1]  the owner nonce
//
// Answers 1, or 0 when the owner does not hold a pending key.
var releaseEventKeyScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'st', 'own')
if v[1] ~= 'p' or v[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lease', 0)
return 1
`)

// ReleaseEventKey implements EventKeys.
func (r *Redis) ReleaseEventKey(ctx context.Context, k EventKey) error {
	if err := releaseEventKeyScript.Run(ctx, r.rdb, []string{eventKeyKey(k.Scope, k.Key)}, k.Owner).Err(); err != nil {
		return fmt.Errorf("release an event's idempotency key: %w", err)
	}
	return nil
}
