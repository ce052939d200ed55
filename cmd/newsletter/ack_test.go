package main

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestReplicaAckerDefault: NEWSLETTER_REDIS_ACK_REPLICAS unset waits for
// no replica on a Redis that has none (api.Deps.Acker stays nil), or
// that does not say (miniredis: with a warning), 0 waits for none, and a
// number set waits for that many, with a warning when fewer are
// connected (or when Redis does not say).
func TestReplicaAckerDefault(t *testing.T) {
	rdb, url := redistest.Own(t, redistest.DBCommand)
	// The embedded stand-in has no INFO replication.
	miniredis := os.Getenv(redistest.EnvURL) == ""
	for _, c := range []struct {
		replicas int
		want     int // 0: no Acker
		warns    bool
	}{
		{config.AckReplicasDetect, 0, miniredis},
		{0, 0, false},
		{1, 1, true}, // a lone Redis: none connected; miniredis: cannot say
	} {
		var logged bytes.Buffer
		a := &app{cfg: &appConfig{Config: &config.Config{RedisURL: url, RedisAckReplicas: c.replicas, RedisAckTimeout: 50 * time.Millisecond}},
			rdb: rdb, log: slog.New(slog.NewTextHandler(&logged, nil))}
		acker := replicaAcker(a)
		got := 0
		if acker != nil {
			got = acker.(*redisconn.Acker).Replicas()
		}
		if got != c.want {
			t.Errorf("replicas %d: the API waits for %d, want %d", c.replicas, got, c.want)
		}
		if warned := strings.Contains(logged.String(), "level=WARN"); warned != c.warns {
			t.Errorf("replicas %d: warned %v, want %v; log:\n%s", c.replicas, warned, c.warns, logged.String())
		}
	}
}
