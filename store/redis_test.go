package store_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/rediscluster"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

func TestRedisContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			c, _ := redistest.New(t, redistest.DBStore)
			return store.NewRedis(c)
		},
	})
}

// TestClusterContract runs the store's contract on a real Redis Cluster
// (three primaries, three replicas; skipped without redis-server): every
// key a script builds itself must sit in the slot of its KEYS, which one
// Redis does not check and a cluster refuses otherwise.
func TestClusterContract(t *testing.T) {
	c := rediscluster.Start(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			cl := c.Client(t)
			ctx := context.Background()
			if err := cl.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				return n.FlushAll(ctx).Err()
			}); err != nil {
				t.Fatal(err)
			}
			s := store.NewRedis(cl)
			if err := s.CheckVersion(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
