package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterName is the Sentinel name of the soak's Redis.
const masterName = "soak"

// redisSet is a primary, its replica and three Sentinels, each a
// redis-server of its own on loopback. Nothing is persisted: a killed
// primary comes back empty and only after Sentinel has promoted the
// replica, so it rejoins as a replica and the data lives on.
type redisSet struct {
	dir       string
	ports     [2]int // the two data servers; either may be the primary
	sentinels [3]int

	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

func startRedis(dir string, base, sentinelBase int) (*redisSet, error) {
	r := &redisSet{dir: dir, ports: [2]int{base, base + 1}, procs: map[int]*exec.Cmd{}}
	if err := r.startData(base, ""); err != nil {
		return nil, err
	}
	if err := r.startData(base+1, fmt.Sprintf("127.0.0.1 %d", base)); err != nil {
		return nil, err
	}
	for i := range r.sentinels {
		r.sentinels[i] = sentinelBase + i
		if err := r.startSentinel(r.sentinels[i]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// URL is NEWSLETTER_REDIS_URL through the Sentinels.
func (r *redisSet) URL() string {
	addrs := make([]string, len(r.sentinels))
	for i, p := range r.sentinels {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "?master=" + masterName
}

// Client is a go-redis client that follows the Sentinels' primary.
func (r *redisSet) Client() *redis.Client {
	addrs := make([]string, len(r.sentinels))
	for i, p := range r.sentinels {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: masterName, SentinelAddrs: addrs, MaxRetries: 5})
}

func (r *redisSet) startData(port int, replicaOf string) error {
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir}
	if replicaOf != "" {
		args = append(args, "--replicaof", replicaOf)
	}
	return r.spawn(port, args)
}

func (r *redisSet) startSentinel(port int) error {
	conf := filepath.Join(r.dir, fmt.Sprintf("sentinel-%d.conf", port))
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
		"sentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
		port, r.dir, masterName, r.ports[0], masterName, masterName, masterName)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	return r.spawn(port, []string{conf, "--sentinel"})
}

func (r *redisSet) spawn(port int, args []string) error {
	log, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("redis-%d.log", port)))
	if err != nil {
		return err
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = log, log
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-server on %d: %w", port, err)
	}
	go func() { _ = cmd.Wait() }() // reaped here; killPrimary waits on the port instead
	r.mu.Lock()
	r.procs[port] = cmd
	r.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer func() { warn("close redis probe", c.Close()) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %d did not answer (a port in use? see %s)", port, log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Primary is the port the Sentinels name as the primary now.
func (r *redisSet) Primary(ctx context.Context) (int, error) {
	var last error
	for _, p := range r.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p)})
		addr, err := c.GetMasterAddrByName(ctx, masterName).Result()
		warn("close sentinel client", c.Close())
		if err == nil && len(addr) == 2 {
			return strconv.Atoi(addr[1])
		}
		last = err
	}
	return 0, fmt.Errorf("no sentinel names a primary: %v", last)
}

// killPrimary kills -9 the primary, waits for the Sentinels to promote
// the replica (up to a minute), then starts the killed one again, which
// the Sentinels turn into the new primary's replica, and waits (up to
// 90 s) until it has synced: only then can the next primary kill come.
// A primary lost again while its only replica is still empty (restarted
// with no persistence, turned into a replica some 10 s later, then
// syncing) takes the whole data set with it: a 3-minute trial that
// killed it 11 s after the restart lost every write (issue #45). One
// replica with no persistence survives one failure per resync, no more.
func (r *redisSet) killPrimary(ctx context.Context) error {
	old, err := r.Primary(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	cmd := r.procs[old]
	r.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		now, err := r.Primary(ctx)
		if err == nil && now != old {
			break
		}
		if time.Now().After(deadline) {
			break // started again anyway: a Redis left dead would end the soak
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := r.startData(old, ""); err != nil {
		return err
	}
	return waitSynced(ctx, old, 90*time.Second)
}

// waitSynced waits until the server on port is a replica whose link to
// its primary is up (its first sync done).
func waitSynced(ctx context.Context, port int, limit time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer func() { warn("close redis probe", c.Close()) }()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %d: not a synced replica %s after its restart", port, limit)
}

func (r *redisSet) env() []string { return []string{"NEWSLETTER_REDIS_URL=" + r.URL()} }

func (r *redisSet) client() redis.UniversalClient { return r.Client() }

func (r *redisSet) describe() string {
	return fmt.Sprintf("Redis %d-%d, Sentinels %d-%d", r.ports[0], r.ports[1], r.sentinels[0], r.sentinels[2])
}

// usedMemory is the primary's used_memory in bytes.
func (r *redisSet) usedMemory(ctx context.Context, c redis.UniversalClient) (float64, error) {
	return usedMemory(ctx, c)
}

// usedMemory is the used_memory of the server c talks to, in bytes.
func usedMemory(ctx context.Context, c redis.Cmdable) (float64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO")
}

// Stop kills every redis-server of the set.
func (r *redisSet) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cmd := range r.procs {
		_ = cmd.Process.Kill() // may be dead already: the primary killed last
	}
}
