package feedback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Nonces remembers the one-time values that signed webhook requests carry
// (a Mailgun token), so that a captured signature cannot be used again
// with another body while its timestamp is still fresh.
type Nonces interface {
	// Use records nonce as used by the request whose body hashes to
	// digest, for ttl. It answers false when another body used the
	// nonce within ttl: a replay. The same body again (a provider
	// retrying a request it did not see answered) is true: its events
	// are deduplicated by their ids anyway.
	Use(ctx context.Context, nonce, digest string, ttl time.Duration) (bool, error)
}

// prefixNonce is the Redis key of a used nonce (+ sha256 of it, hex): the
// body digest that used it, expiring at the end of its validity.
const prefixNonce = "nl:webhook:nonce:"

// nonceScript records a nonce unless another body holds it.
//
//	KEYS[1]  prefixNonce .. sha256(nonce)
//	ARGV[1]  the body's digest
//	ARGV[2]  ttl, ms
//
// Writes the key with its expiry when absent. Answers 1 (first use, or the
// same body again) or 0 (another body: a replay).
var nonceScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
`)

// RedisNonces keeps Nonces in Redis, shared by every replica of the API.
type RedisNonces struct{ Client redis.Scripter }

// Use implements Nonces.
func (r RedisNonces) Use(ctx context.Context, nonce, digest string, ttl time.Duration) (bool, error) {
	h := sha256.Sum256([]byte(nonce))
	n, err := nonceScript.Run(ctx, r.Client, []string{prefixNonce + hex.EncodeToString(h[:])}, digest, max(ttl.Milliseconds(), 1)).Int()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}
