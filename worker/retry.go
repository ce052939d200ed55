package worker

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/store"
)

// DefaultRetryBase is the first retry's delay after a failed send.
const DefaultRetryBase = 10 * time.Second

// RetryPolicy is the worker's backoff. The zero value uses the defaults.
type RetryPolicy struct {
	// Base is the first retry's delay (DefaultRetryBase); each retry
	// doubles it up to Max (default 1h).
	Base, Max time.Duration
	// Throttled replaces Base after a 421/450/4.7.x answer (default 2m):
	// a receiver that asks us to slow down is not helped by a quick retry.
	Throttled time.Duration
	// Busy is the wait after ErrDeliveryBusy (default DefaultClaimTTL).
	Busy time.Duration
	// RedisAway is the wait after Redis could not be reached (default
	// DefaultRedisAwayRetry): short, so a batch caught by a Redis restart
	// goes on seconds after Redis is back, and not counted as a failure.
	RedisAway time.Duration
}

// DefaultRedisAwayRetry is the retry delay after Redis could not be
// reached. asynq records the retry only once Redis answers again, so a
// short delay cannot spin while it is away.
const DefaultRedisAwayRetry = 2 * time.Second

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Base <= 0 {
		p.Base = DefaultRetryBase
	}
	if p.Max <= 0 {
		p.Max = time.Hour
	}
	if p.Throttled <= 0 {
		p.Throttled = 2 * time.Minute
	}
	if p.Busy <= 0 {
		p.Busy = DefaultClaimTTL
	}
	if p.RedisAway <= 0 {
		p.RedisAway = DefaultRedisAwayRetry
	}
	return p
}

// retryAfterer is an error that says when to come back (an HTTP mail API's
// Retry-After, the shared send-rate limiter).
type retryAfterer interface{ RetryAfter() time.Duration }

// Delay is an asynq RetryDelayFunc: exponential backoff with jitter. The
// jitter draws from the upper half of the window ("equal jitter"), so
// retries spread out while each still waits longer than the one before.
func (p RetryPolicy) Delay(n int, err error, _ *asynq.Task) time.Duration {
	p = p.withDefaults()
	var ra retryAfterer
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		return ra.RetryAfter()
	}
	if se := email.AsSendError(err); se != nil && se.RetryAfter > 0 {
		return se.RetryAfter
	}
	if errors.Is(err, ErrDeliveryBusy) {
		return p.Busy
	}
	if redisAway(err) {
		return p.RedisAway
	}
	base := p.Base
	if se := email.AsSendError(err); se != nil && se.Class == email.Throttled {
		base = p.Throttled
	}
	d := base << min(n, 20)
	if d > p.Max || d <= 0 {
		d = p.Max
	}
	return d/2 + rand.N(d/2+1)
}

// IsFailure tells asynq which errors count against a task's retries: a held
// delivery mark, a rate limit or a Redis that was away only postpones the
// task.
func IsFailure(err error) bool {
	var ra retryAfterer
	return !errors.Is(err, ErrDeliveryBusy) && !errors.As(err, &ra) && !redisAway(err)
}

// redisAway tells a task that failed because Redis could not be reached
// (store.Unavailable) from one whose mail failed: an error that came from
// sending is the mail's, whatever network error it wraps.
func redisAway(err error) bool {
	return email.AsSendError(err) == nil && store.Unavailable(err)
}

// ProviderDelay is Delay, or the provider's own wait when that is longer
// (a deliveryFailure's Retry-After): the notification lanes' retry delay,
// so a provider that asked for an hour is not asked again in a minute.
func (p RetryPolicy) ProviderDelay(n int, err error, t *asynq.Task) time.Duration {
	d := p.Delay(n, err, t)
	var f *deliveryFailure
	if errors.As(err, &f) && f.wait > d {
		return f.wait
	}
	return d
}
