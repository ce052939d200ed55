package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
)

// SetServiceTopics records the topics the service runs with (each role
// at its start), so a command run beside it with another environment
// reads and writes the same topics (ServiceTopics).
func (r *Redis) SetServiceTopics(ctx context.Context, s *topics.Set) error {
	b, err := json.Marshal(s.Topics)
	if err != nil {
		return fmt.Errorf("record the service's topics: %w", err)
	}
	return wrapErr("record the service's topics", r.rdb.Set(ctx, keyServiceTopics, b, 0).Err())
}

// ServiceTopics are the topics the service last started with (nil when no
// role recorded them yet). Only the topics are kept: the sequence is the
// worker's business.
func (r *Redis) ServiceTopics(ctx context.Context) (*topics.Set, error) {
	b, err := r.rdb.Get(ctx, keyServiceTopics).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrapErr("read the service's topics", err)
	}
	var list []topics.Topic
	if err := json.Unmarshal(b, &list); err != nil || len(list) == 0 {
		return nil, fmt.Errorf("the service's topics (%s) are unreadable: %v", keyServiceTopics, err)
	}
	return &topics.Set{Topics: list}, nil
}
