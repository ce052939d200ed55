package redisconn_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestAckWithoutReplicas: a Redis without replicas has none to
// acknowledge, so an Acker asking for one answers ErrNotAcked after its
// timeout, and one asking for none answers at once without a command.
func TestAckWithoutReplicas(t *testing.T) {
	if os.Getenv(redistest.EnvURL) == "" {
		t.Skip(redistest.EnvURL + " is unset: WAIT and INFO replication need a real Redis, not the embedded one")
	}
	rdb, _ := redistest.Own(t, 0)
	ctx := context.Background()
	if n, err := redisconn.ConnectedReplicas(ctx, rdb); err != nil || n != 0 {
		t.Fatalf("ConnectedReplicas of a lone Redis: %d, %v; want 0", n, err)
	}
	err := redisconn.NewAcker(rdb, 1, 50*time.Millisecond).Ack(ctx)
	if !errors.Is(err, redisconn.ErrNotAcked) {
		t.Fatalf("Ack for 1 replica on a lone Redis: %v, want ErrNotAcked", err)
	}
	if v, err := rdb.Get(ctx, redisconn.AckKey).Int(); err != nil || v != 1 {
		t.Errorf("marker %s = %d, %v: want 1 (the write the WAIT waited for)", redisconn.AckKey, v, err)
	}
	var none *redisconn.Acker
	if err := none.Ack(ctx); err != nil {
		t.Errorf("a nil Acker: %v", err)
	}
	if err := redisconn.NewAcker(rdb, 0, time.Millisecond).Ack(ctx); err != nil {
		t.Errorf("an Acker for 0 replicas: %v", err)
	}
	if v, _ := rdb.Get(ctx, redisconn.AckKey).Int(); v != 1 {
		t.Errorf("marker %s = %d after Acks for no replica: they should send nothing", redisconn.AckKey, v)
	}
}

// TestAckOnCluster: on a cluster each primary's replica acknowledges its
// own marker, in a slot that primary serves; asking for more replicas
// than a primary has is ErrNotAcked.
func TestAckOnCluster(t *testing.T) {
	c := rediscluster.Start(t)
	cl := c.Client(t)
	ctx := context.Background()
	if n, err := redisconn.ConnectedReplicas(ctx, cl); err != nil || n != 1 {
		t.Fatalf("ConnectedReplicas of a cluster with a replica per primary: %d, %v; want 1", n, err)
	}
	if err := redisconn.NewAcker(cl, 1, 10*time.Second).Ack(ctx); err != nil {
		t.Fatalf("Ack for 1 replica: %v", err)
	}
	// Each primary holds its own marker, and only that one.
	var each sync.Map
	err := cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, redisconn.AckKey+":*").Result()
		each.Store(node.Options().Addr, len(keys))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	primaries := 0
	each.Range(func(addr, n any) bool {
		primaries++
		if n != 1 {
			t.Errorf("primary %s holds %d markers, want 1", addr, n)
		}
		return true
	})
	if primaries != 3 {
		t.Errorf("%d primaries, want 3", primaries)
	}
	err = redisconn.NewAcker(cl, 2, 100*time.Millisecond).Ack(ctx)
	if !errors.Is(err, redisconn.ErrNotAcked) {
		t.Fatalf("Ack for 2 replicas where each primary has 1: %v, want ErrNotAcked", err)
	}
}
