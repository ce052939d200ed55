// Package pace keeps mail sending within what the receivers accept: one
// send rate shared by every worker process (GCRA in Redis, through
// go-redis/redis_rate), and a per-domain pause for receivers that answered
// "slow down" (421, 450, 4.7.x).
package pace

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

const (
	rateKey        = "nl:pace:send" // the e-mail lane's
	laneKeyPrefix  = "nl:pace:lane:"
	confirmKey     = "nl:pace:confirm"
	throttlePrefix = "nl:pace:domain:"
)

// LaneKey is the Redis key of lane's shared rate. The e-mail lane keeps the
// key it had before there were lanes, so a rolling upgrade shares one rate
// between old and new workers; every other lane has its own.
func LaneKey(lane string) string {
	if lane == "email" {
		return rateKey
	}
	return laneKeyPrefix + lane
}

// Limiter is the shared pacing state in Redis.
type Limiter struct {
	rdb   redis.UniversalClient
	rate  *redis_rate.Limiter
	key   string
	limit redis_rate.Limit
}

// New paces to perSecond mails across every process on rdb: the e-mail
// lane's rate (NEWSLETTER_SEND_RATE).
func New(rdb redis.UniversalClient, perSecond int) *Limiter {
	return NewLane(rdb, "email", perSecond)
}

// NewLane paces lane to perSecond sends across every process on rdb
// (NEWSLETTER_PUSH_RATE, NEWSLETTER_WEBHOOK_RATE), under LaneKey(lane):
// lanes never take from each other's rate. The burst is a tenth of a
// second's worth, so no window of any length sees much more than the rate
// (redis_rate's default burst of a full second would let a fresh window
// see twice the rate).
func NewLane(rdb redis.UniversalClient, lane string, perSecond int) *Limiter {
	return &Limiter{
		rdb: rdb, rate: redis_rate.NewLimiter(rdb), key: LaneKey(lane),
		limit: redis_rate.Limit{Rate: perSecond, Period: time.Second, Burst: max(1, perSecond/10)},
	}
}

// NewConfirmations paces confirmations to perMinute across every process
// (NEWSLETTER_CONFIRM_RATE): what a signup-bombing attack can make us send
// at most, whatever the per-client and per-address limits let through.
// They are not held by the bulk send rate: a person waits for them.
func NewConfirmations(rdb redis.UniversalClient, perMinute int) *Limiter {
	return &Limiter{
		rdb: rdb, rate: redis_rate.NewLimiter(rdb), key: confirmKey,
		limit: redis_rate.Limit{Rate: perMinute, Period: time.Minute, Burst: max(1, perMinute/10)},
	}
}

// TakeN asks for up to n sends at once (a batch): how many were granted,
// and when none were, how long until one is free.
func (l *Limiter) TakeN(ctx context.Context, n int) (int, time.Duration, error) {
	res, err := l.rate.AllowAtMost(ctx, l.key, l.limit, n)
	if err != nil {
		return 0, 0, fmt.Errorf("send rate: %w", err)
	}
	if res.Allowed > 0 {
		return res.Allowed, 0, nil
	}
	return 0, max(res.RetryAfter, time.Millisecond), nil
}

// DomainWait is how long domain is still paused.
func (l *Limiter) DomainWait(ctx context.Context, domain string) (time.Duration, error) {
	d, err := l.rdb.PTTL(ctx, throttlePrefix+domain).Result()
	if err != nil {
		return 0, fmt.Errorf("domain pause %s: %w", domain, err)
	}
	return max(d, 0), nil // -2: no key, -1: no expiry (never set so)
}

// Throttle pauses domain for d, or extends a shorter pause.
func (l *Limiter) Throttle(ctx context.Context, domain string, d time.Duration) error {
	// SET ... GT is Redis 7; a short script keeps older servers and
	// miniredis working.
	return throttleScript.Run(ctx, l.rdb, []string{throttlePrefix + domain}, d.Milliseconds()).Err()
}

var throttleScript = redis.NewScript(`
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
`)
