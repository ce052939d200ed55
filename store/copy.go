package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of CopyToCluster, for errors.Is; their text says what to do.
var (
	// ErrTargetInUse: the cluster already holds a data set (its layout
	// version): a copy would mix two.
	ErrTargetInUse = errors.New("the target already holds a data set")
	// ErrSourceInUse: roles still run on the source (asynq servers
	// report in): what they write during the copy would be lost.
	ErrSourceInUse = errors.New("roles still run on the source")
)

// CopyToCluster copies one Redis (src, its data in this layout: run
// CheckVersion on it first) into a Redis Cluster (dst), every key with its
// expiry: the store's and asynq's (the tasks waiting in the queues go
// with them). It refuses while roles run on src (ErrSourceInUse) and when
// dst already holds a data set (ErrTargetInUse). The layout version is
// copied last, so a copy stopped half way leaves dst without one and the
// same copy may run again; every key is written whole (RESTORE … REPLACE),
// so running it again writes the same. progress, when set, hears the keys
// copied so far every 10,000. Answers how many keys it copied.
func CopyToCluster(ctx context.Context, src *redis.Client, dst *redis.ClusterClient, progress func(n int64)) (int64, error) {
	live, err := src.ZCount(ctx, asynqServers, fmt.Sprint(time.Now().Unix()), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("the source: %w", err)
	}
	if live > 0 {
		return 0, fmt.Errorf("%w: %d asynq servers reported in the last minutes; stop every role on it (serve, api, worker, scheduler, bounces) and run this again", ErrSourceInUse, live)
	}
	if v, err := src.Get(ctx, keySchema).Result(); err != nil || v != fmt.Sprint(Layout) {
		return 0, fmt.Errorf("the source is not in layout %d (%q %v): start any role of this version on it once, or run newsletter check, to bring it up", Layout, v, err)
	}
	switch _, err := dst.Get(ctx, keySchema).Result(); {
	case err == nil:
		return 0, fmt.Errorf("%w (%s is set): copy into an empty cluster", ErrTargetInUse, keySchema)
	case !errors.Is(err, redis.Nil):
		return 0, fmt.Errorf("the cluster: %w", err)
	}
	var n int64
	iter := src.Scan(ctx, 0, "*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		copied, err := copyKeys(ctx, src, dst, batch)
		n += copied
		batch = batch[:0]
		if progress != nil && n/10000 != (n-copied)/10000 {
			progress(n)
		}
		return err
	}
	for iter.Next(ctx) {
		if k := iter.Val(); k != keySchema {
			batch = append(batch, k)
		}
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("list the source's keys: %w", err)
	}
	if err := flush(); err != nil {
		return n, err
	}
	copied, err := copyKeys(ctx, src, dst, []string{keySchema})
	return n + copied, err
}

// copyKeys copies keys whole, with their expiry: DUMP and PTTL from src in
// one round trip, RESTORE … REPLACE into dst in one pipeline (the cluster
// client sends each to its node). A key gone between the SCAN and the DUMP
// is skipped.
func copyKeys(ctx context.Context, src *redis.Client, dst *redis.ClusterClient, keys []string) (int64, error) {
	dumps := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	if _, err := src.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			dumps[i] = p.Dump(ctx, k)
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read %d keys: %w", len(keys), err)
	}
	var n int64
	_, err := dst.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			v, err := dumps[i].Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			ttl := ttls[i].Val()
			if ttl < 0 {
				ttl = 0 // no expiry
			}
			p.RestoreReplace(ctx, k, ttl, v)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("write %d keys: %w", len(keys), err)
	}
	return n, nil
}
