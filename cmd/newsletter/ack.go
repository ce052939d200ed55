package main

import (
	"context"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/redisconn"
)

// replicaAcker is what holds the API's answers to changes until Redis
// replicas have them (api.Deps.Acker; docs/operating.md, "What
// acknowledged means"): nil when it waits for none. Unset,
// NEWSLETTER_REDIS_ACK_REPLICAS is one when every primary has a replica
// connected at start, else none (and none, with a warning, when Redis
// does not say).
func replicaAcker(a *app) api.Acker {
	if a.cfg.Embedded() {
		return nil // no replicas; the configuration refuses more than 0
	}
	n := a.cfg.RedisAckReplicas
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	connected, err := redisconn.ConnectedReplicas(ctx, a.rdb)
	if n == config.AckReplicasDetect {
		// A Redis that does not tell (INFO restricted by an ACL, or a
		// stand-in such as miniredis) is taken for one without replicas,
		// and said so: setting the variable says it for sure.
		if err != nil {
			a.log.Warn("redis: could not read the replicas (INFO replication): changes are answered once the primary has them; set NEWSLETTER_REDIS_ACK_REPLICAS to wait for replicas",
				"err", err)
			return nil
		}
		n = min(connected, 1)
	}
	switch {
	case n == 0:
		a.log.Info("redis: no replicas connected at start: changes are answered once the primary has them (NEWSLETTER_REDIS_ACK_REPLICAS unset)")
		return nil
	case err != nil:
		a.log.Warn("redis: could not read the replicas (INFO replication) to check NEWSLETTER_REDIS_ACK_REPLICAS against them", "replicas", n, "err", err)
	case connected < n:
		a.log.Warn("redis: fewer replicas connected than NEWSLETTER_REDIS_ACK_REPLICAS asks for: changes are answered 503 until they connect",
			"connected", connected, "replicas", n)
	}
	a.log.Info("redis: changes are answered once replicas have them", "replicas", n, "timeout", a.cfg.RedisAckTimeout)
	return redisconn.NewAcker(a.rdb, n, a.cfg.RedisAckTimeout)
}
