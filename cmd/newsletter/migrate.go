package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/store"
)

const migrateUsage = `usage: newsletter migrate --to-cluster --from redis://host:port/db
  copies the service's one Redis (--from, as NEWSLETTER_REDIS_URL had it) into
  the Redis Cluster of NEWSLETTER_REDIS_CLUSTER_ADDRS (with NEWSLETTER_REDIS_PASSWORD)`

// migrateCmd is `newsletter migrate --to-cluster --from URL`: the move from
// one Redis to a cluster. It checks the source's layout first, as any
// role's start-up does (store.CheckVersion: data in an older layout is
// refused with the release that upgrades it, store.UpgradeFrom), then
// copies every key, the store's and the queues', with its expiry
// (store.CopyToCluster). Every
// role must be stopped on the source, and the cluster must hold no data
// set yet; a copy stopped half way may run again. Afterwards the roles
// start with NEWSLETTER_REDIS_CLUSTER_ADDRS in place of
// NEWSLETTER_REDIS_URL; the source is left as it was, to go back to.
func migrateCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	toCluster := fs.Bool("to-cluster", false, "copy into the Redis Cluster of NEWSLETTER_REDIS_CLUSTER_ADDRS")
	from := fs.String("from", "", "the one Redis to copy from: a redis:// or rediss:// URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*toCluster || *from == "" || fs.NArg() != 0 {
		return errors.New(migrateUsage)
	}
	seeds := getenv("NEWSLETTER_REDIS_CLUSTER_ADDRS")
	if seeds == "" {
		return errors.New("NEWSLETTER_REDIS_CLUSTER_ADDRS: name the cluster to copy into (seed nodes host:port,…)")
	}
	cluster, err := redisconn.ParseCluster(seeds, getenv("NEWSLETTER_REDIS_PASSWORD"))
	if err != nil {
		return fmt.Errorf("NEWSLETTER_REDIS_CLUSTER_ADDRS: %w", err)
	}
	srcOpt, err := asynq.ParseRedisURI(*from)
	if err != nil {
		return fmt.Errorf("--from: want a redis:// or rediss:// URL: %w", err)
	}
	srcConn, err := redisconn.Client(srcOpt, 0)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	src, ok := srcConn.(*redis.Client)
	if !ok {
		return fmt.Errorf("--from: want one Redis, not %T", srcConn)
	}
	defer closeLogged(slog.Default(), "source redis", src)
	dstConn, err := redisconn.Client(cluster, 0)
	if err != nil {
		return err
	}
	dst := dstConn.(*redis.ClusterClient)
	defer closeLogged(slog.Default(), "cluster", dst)

	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := store.NewRedis(src).CheckVersion(ctx, log); err != nil {
		return fmt.Errorf("the source, %s: %w", redactURL(*from), err)
	}
	n, err := store.CopyToCluster(ctx, src, dst, func(n int64) {
		log.Info("migrate: copying", "keys", n)
	})
	if err != nil {
		return fmt.Errorf("copy %s into the cluster %s (%d keys copied): %w", redactURL(*from), cluster, n, err)
	}
	if err := store.NewRedis(dst).CheckVersion(ctx, log); err != nil {
		return fmt.Errorf("the cluster after the copy: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "copied %d keys from %s into the cluster %s; start the roles with NEWSLETTER_REDIS_CLUSTER_ADDRS=%s in place of NEWSLETTER_REDIS_URL\n",
		n, redactURL(*from), cluster, cluster)
	return err
}
