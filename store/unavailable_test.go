package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/nettest"
)

func TestUnavailable(t *testing.T) {
	// A real refused connection: a port where nothing listens.
	addr := nettest.RefusedAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	refused := rdb.Ping(context.Background()).Err()
	if refused == nil {
		t.Fatal("ping to a closed port succeeded")
	}

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("claim 3 marks: %w", refused), true},
		{"loading", fmt.Errorf("get: %w", reply("LOADING Redis is loading the dataset in memory")), true},
		{"closed client", redis.ErrClosed, true},
		// asynq's enqueue script, whose error asynq turns into text.
		{"asynq enqueue refused", fmt.Errorf("UNKNOWN: redis eval error: %v", refused), true},
		{"asynq enqueue loading", errors.New("UNKNOWN: redis eval error: LOADING Redis is loading the dataset in memory"), true},
		{"asynq script error", errors.New("UNKNOWN: redis eval error: ERR user_script:1: boom"), false},
		// Every node of a cluster between a primary's loss and its
		// replica's promotion.
		{"cluster failing over", fmt.Errorf("queue depth of critical: %w", reply("CLUSTERDOWN The cluster is down")), true},
		{"asynq enqueue, cluster failing over", errors.New("UNKNOWN: redis eval error: CLUSTERDOWN The cluster is down"), true},
		{"demoted primary", reply("READONLY You can't write against a read only replica."), true},
		{"script error", reply("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{"not found", ErrNotFound, false},
		{"plain", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s (%v): %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// reply is a Redis error reply as go-redis hands it over (its own type is
// internal).
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}
