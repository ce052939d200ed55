package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
)

// redisPair is a primary and its replica, each a redis-server of the
// benchmark's own on loopback, keeping nothing on disk.
type redisPair struct {
	dir           string
	ports         [2]int
	procs         []*exec.Cmd
	primary       *redis.Client
	replicaClient *redis.Client
}

// startPrimaryAndReplica starts the pair on PORT_BASE and the next port
// (free ports when unset) and waits until the replica has synced.
func startPrimaryAndReplica() (*redisPair, error) {
	dir, err := os.MkdirTemp("", "bench-ack")
	if err != nil {
		return nil, err
	}
	rp := &redisPair{dir: dir}
	if rp.ports, err = ports(); err != nil {
		rp.stop()
		return nil, err
	}
	for i, port := range rp.ports {
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
		if i == 1 {
			args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(rp.ports[0]))
		}
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			rp.stop()
			return nil, fmt.Errorf("redis-server (is it installed?): %w", err)
		}
		rp.procs = append(rp.procs, cmd)
	}
	rp.primary = redis.NewClient(&redis.Options{Addr: addr(rp.ports[0]), PoolSize: 4})
	rp.replicaClient = redis.NewClient(&redis.Options{Addr: addr(rp.ports[1]), PoolSize: 1})
	if err := rp.waitSynced(); err != nil {
		rp.stop()
		return nil, err
	}
	return rp, nil
}

func (rp *redisPair) url() string { return "redis://" + addr(rp.ports[0]) + "/0" }

// waitSynced polls the replica until its link to the primary is up, for
// up to 20 seconds.
func (rp *redisPair) waitSynced() error {
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		info, err := rp.replicaClient.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the replica on %d did not sync with its primary in 20 s", rp.ports[1])
}

func (rp *redisPair) stop() {
	for _, c := range []*redis.Client{rp.primary, rp.replicaClient} {
		if c != nil {
			bench.Warn("close redis client", c.Close())
		}
	}
	for _, p := range rp.procs {
		bench.Warn("stop redis-server", p.Process.Kill())
		_ = p.Wait() // killed on purpose: its exit status says so
	}
	bench.Warn("remove the Redis folder", os.RemoveAll(rp.dir))
}

// ports are PORT_BASE and the next, or two free ports.
func ports() ([2]int, error) {
	if v := os.Getenv("PORT_BASE"); v != "" {
		base, err := strconv.Atoi(v)
		if err != nil || base < 1024 || base > 65000 {
			return [2]int{}, fmt.Errorf("PORT_BASE=%q: a port from 1024 to 65000", v)
		}
		return [2]int{base, base + 1}, nil
	}
	var p [2]int
	for i := range p {
		a, err := bench.FreeAddr()
		if err != nil {
			return p, err
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return p, err
		}
		if p[i], err = strconv.Atoi(port); err != nil {
			return p, err
		}
	}
	return p, nil
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
