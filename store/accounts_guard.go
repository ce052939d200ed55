package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The second factor's limit: at most SecondFactorFailures failed codes
// (after a right password) per account, and per client, in a window of
// SecondFactorWindow from the first; then the account (or the client)
// is paused for the rest of the window, never for good. Tries are
// counted before the code is checked, so codes sent at once are counted
// at once: of twenty sent together five are checked.
const (
	SecondFactorFailures = 5
	SecondFactorWindow   = 15 * time.Minute
)

// NameFailuresTTL is how long the failed sign-ins of an address are
// remembered after the last one: long enough to keep a guesser's hold at
// its cap, short enough that the keys a flood of made-up addresses
// leaves stay few (at the hash slots' rate, some 40 a second on two
// cores, an hour is about 150,000 keys, some 15 MB).
const NameFailuresTTL = time.Hour

// ErrInviteRevoked is an invite an admin revoked: its link says so and
// does nothing.
var ErrInviteRevoked = errors.New("this invite was revoked")

// AccountGuard are the counts that slow guessing at the console's
// sign-in (store.Redis): per attempted address, and per account and
// client for the second factor.
type AccountGuard interface {
	// SignInFailedAs counts a failed sign-in as the address email
	// (whether or not it has an account, so both answer alike): the
	// failures in a row now.
	SignInFailedAs(ctx context.Context, email string) (int, error)
	// SignedInAs forgets the failures of email.
	SignedInAs(ctx context.Context, email string) error
	// TrySecondFactor counts a try of the account's second factor from
	// client, before the code is checked: 0 when the code may be
	// checked, else how long the account or the client is paused.
	TrySecondFactor(ctx context.Context, id int64, client string) (time.Duration, error)
	// SecondFactorPassed takes back the try of a right code.
	SecondFactorPassed(ctx context.Context, id int64, client string) error
}

// nameFailedScript counts a failure of an address.
//
//	KEYS[1]  the address's key    ARGV[1]  its TTL (ms)
var nameFailedScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
`)

// SignInFailedAs implements AccountGuard.
func (r *Redis) SignInFailedAs(ctx context.Context, email string) (int, error) {
	return nameFailedScript.Run(ctx, r.rdb, []string{nameFailKey(email)}, NameFailuresTTL.Milliseconds()).Int()
}

// SignedInAs implements AccountGuard.
func (r *Redis) SignedInAs(ctx context.Context, email string) error {
	return r.rdb.Del(ctx, nameFailKey(email)).Err()
}

// trySecondFactorScript counts a try against the account and the client:
// the window starts with the first try and is never extended.
//
//	KEYS[1]  the account's tries   KEYS[2]  the client's tries
//	ARGV[1]  the window (ms)       ARGV[2]  SecondFactorFailures
//
// Answers 0 (check the code) or the ms left of the longer pause.
var trySecondFactorScript = redis.NewScript(`
local wait = 0
for i = 1, 2 do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
  if n > tonumber(ARGV[2]) then wait = math.max(wait, redis.call('PTTL', KEYS[i]), 1) end
end
return wait
`)

// TrySecondFactor implements AccountGuard.
func (r *Redis) TrySecondFactor(ctx context.Context, id int64, client string) (time.Duration, error) {
	ms, err := trySecondFactorScript.Run(ctx, r.rdb, tryKeys(id, client), SecondFactorWindow.Milliseconds(), SecondFactorFailures).Int64()
	return time.Duration(ms) * time.Millisecond, err
}

// secondFactorPassedScript takes a try back (a key that expired
// meanwhile stays gone).
//
//	KEYS[1]  the account's tries   KEYS[2]  the client's tries
var secondFactorPassedScript = redis.NewScript(`
for i = 1, 2 do
  if (tonumber(redis.call('GET', KEYS[i]) or '0')) > 0 then redis.call('DECR', KEYS[i]) end
end
return 1
`)

// SecondFactorPassed implements AccountGuard.
func (r *Redis) SecondFactorPassed(ctx context.Context, id int64, client string) error {
	return secondFactorPassedScript.Run(ctx, r.rdb, tryKeys(id, client)).Err()
}

// revokeInviteScript marks an open invite revoked: it leaves the list
// (and frees its place) but its record stays until it would have
// expired, so its link can say it was revoked.
//
//	KEYS[1]  the invite's key      KEYS[2]  keyInvites
//	ARGV[1]  now (unix ms)         ARGV[2]  who revoked it
//	ARGV[3]  the invite's hash
//
// Answers the invite's address, or false when there is no open invite.
var revokeInviteScript = redis.NewScript(`
local inv = redis.call('HMGET', KEYS[1], 'email', 'exp', 'revoked')
if not inv[1] or inv[3] or tonumber(inv[2]) <= tonumber(ARGV[1]) then return false end
redis.call('HSET', KEYS[1], 'revoked', ARGV[1], 'revokedby', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return inv[1]
`)

// RevokeInvite ends the open invite with hash, by by: its address, or
// ErrInviteNotFound (used, expired, revoked or never made).
func (r *Redis) RevokeInvite(ctx context.Context, hash, by string) (string, error) {
	email, err := revokeInviteScript.Run(ctx, r.rdb, []string{inviteKey(hash), keyInvites}, r.now().UnixMilli(), by, hash).Text()
	if errors.Is(err, redis.Nil) {
		return "", ErrInviteNotFound
	}
	return email, err
}
