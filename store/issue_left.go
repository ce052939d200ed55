package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// IssueUnsubscribes counts the people who left through the unsubscribe
// or preferences links of issue's mails (UnsubscribeFrom, LeaveTopicFrom,
// Preferences.FromIssue): each shard keeps a bitmap of its own, set in
// the same script as the change, so a person counts once however often
// they follow the link; the count is the sum of the shards' in one round
// trip.
func (r *Redis) IssueUnsubscribes(ctx context.Context, issue int64) (int64, error) {
	shards := everyShard()
	cmds := make([]*redis.IntCmd, len(shards))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range shards {
			cmds[i] = p.BitCount(ctx, leftByKey(s, issue), nil)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count the unsubscribes of issue %d: %w", issue, err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
