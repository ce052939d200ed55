package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdSeconds is h's cooldown as the scripts take it: whole seconds, at
// least one; 0 for none.
func holdSeconds(h ConfirmHold) int64 {
	if h.Every <= 0 {
		return 0
	}
	return max(int64(h.Every/time.Second), 1)
}

// takeHoldScript counts one mail against a mailbox's allowance (holdLua).
//
//	KEYS[1]  the mailbox's cooldown (holdKeys)
//	KEYS[2]  the mailbox's count of the day (holdKeys)
//	ARGV[1]  cooldown, seconds
//	ARGV[2]  mails a day at most; "0": no cap
//
// Writes both keys when it counts. Answers 1 (counted) or 0 (held).
var takeHoldScript = redis.NewScript(holdLua + `
if takehold(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 1 end
return 0
`)

// TakeHold implements MailHolds.
func (r *Redis) TakeHold(ctx context.Context, kind, email string, h ConfirmHold) (bool, error) {
	if h.Every <= 0 {
		return true, nil
	}
	cool, day := holdKeys(homeShard(email), kind, email)
	n, err := takeHoldScript.Run(ctx, r.rdb, []string{cool, day}, holdSeconds(h), h.PerDay).Int()
	if err != nil {
		return false, fmt.Errorf("take the %s allowance: %w", kind, err)
	}
	return n == 1, nil
}

// giveBackHoldScript undoes the last count of a mailbox's allowance: the
// mail was never sent. For a confirmation it also gives a suppressed
// subscriber's reconfirmation window back; it runs by address then
// (byAddress), where subscribeScript took the allowance.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  the mailbox's cooldown (holdKeys)
//	KEYS[3]  the mailbox's count of the day (holdKeys)
//	ARGV[1]  the address whose reconfirmation to forget, or ""
//
// Deletes the cooldown, decrements the count (not below 0), deletes the
// reconfirmation key of a suppressed subscriber. Answers 'ok' (or 'away',
// 'gone' with nothing written).
var giveBackHoldScript = subscriberScript(`
local id, r, away = nil, nil, nil
if ARGV[1] ~= '' then
  id, r, away = find(ARGV[1])
  if away then return {'away', away} end
  if not id and not HOME then return {'gone'} end
end
redis.call('DEL', KEYS[2])
if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then redis.call('DECR', KEYS[3]) end
if id and (r[1] == 'b' or r[1] == 'c') then redis.call('DEL', RECONF .. id) end
return {'ok'}
`)

// GiveBackHold implements MailHolds.
func (r *Redis) GiveBackHold(ctx context.Context, kind, email string) error {
	keys := func(a string, s shard) []string {
		cool, day := holdKeys(s, kind, email)
		return []string{a, cool, day}
	}
	var err error
	if kind == HoldConfirm {
		_, _, err = r.byAddress(ctx, giveBackHoldScript, email, keys, []any{email})
	} else {
		home := homeShard(email)
		err = giveBackHoldScript.Run(ctx, r.rdb, keys(anchor(home), home), "").Err()
	}
	if err != nil {
		return fmt.Errorf("give back the %s allowance: %w", kind, err)
	}
	return nil
}
