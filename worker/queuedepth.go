package worker

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// QueueDepth reports how many tasks wait in a queue.
type QueueDepth interface {
	Pending(ctx context.Context, queue string) (int, error)
}

// RedisQueueDepth reads the length of asynq's pending list directly. The
// planner asks every 50 ms while the queue is full; asynq's
// Inspector.GetQueueInfo answers the same question with a script that also
// samples the memory of a hundred keys, which cost Redis more per mail than
// the digest's own marks. The list's name is asynq's (base.PendingKey);
// TestRedisQueueDepthAgreesWithAsynq holds it to asynq's own count.
type RedisQueueDepth struct{ Redis redis.UniversalClient }

// Pending implements QueueDepth.
func (d RedisQueueDepth) Pending(ctx context.Context, queue string) (int, error) {
	n, err := d.Redis.LLen(ctx, "asynq:{"+queue+"}:pending").Result()
	if err != nil {
		return 0, fmt.Errorf("queue depth of %s: %w", queue, err)
	}
	return int(n), nil
}
