package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBackend is the Redis the soak runs the service on: a primary and
// replica under Sentinel (redisSet), or a Redis Cluster (clusterSet,
// SOAK_CLUSTER=1).
type redisBackend interface {
	// env is the roles' Redis settings.
	env() []string
	// client is the soak's own client (queues, memory).
	client() redis.UniversalClient
	// killPrimary kills -9 a primary and brings it back as a replica.
	killPrimary(ctx context.Context) error
	// usedMemory sums used_memory over the primaries.
	usedMemory(ctx context.Context, c redis.UniversalClient) (float64, error)
	describe() string
	Stop()
}

// clusterSet is three primaries and three replicas, each a redis-server
// with cluster mode on (client ports base to base+5, bus ports
// busBase to busBase+5), joined by redis-cli --cluster create. Nothing
// is persisted but each node's nodes.conf: a killed primary comes back
// empty, knows it was replaced, and rejoins as its replica's replica.
type clusterSet struct {
	dir           string
	base, busBase int

	mu    sync.Mutex
	procs map[int]*exec.Cmd
}

const clusterNodes = 6

func startCluster(dir string, base, busBase int) (*clusterSet, error) {
	c := &clusterSet{dir: dir, base: base, busBase: busBase, procs: map[int]*exec.Cmd{}}
	for i := range clusterNodes {
		if err := c.startNode(i); err != nil {
			return c, err
		}
	}
	args := append([]string{"--cluster", "create"}, c.addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	return c, c.waitOK(ctx, -1)
}

func (c *clusterSet) addrs() []string {
	out := make([]string, clusterNodes)
	for i := range out {
		out[i] = "127.0.0.1:" + strconv.Itoa(c.base+i)
	}
	return out
}

func (c *clusterSet) startNode(i int) error {
	port := c.base + i
	dir := filepath.Join(c.dir, fmt.Sprintf("cluster-%d", port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\ncluster-enabled yes\ncluster-config-file nodes.conf\n"+
		"cluster-node-timeout 2000\ncluster-replica-validity-factor 0\ncluster-port %d\nappendonly no\nsave \"\"\n"+
		"repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n", port, dir, c.busBase+i)
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("redis-%d.log", port)))
	if err != nil {
		return err
	}
	cmd := exec.Command("redis-server", path)
	cmd.Stdout, cmd.Stderr = log, log
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-server on %d: %w", port, err)
	}
	go func() { _ = cmd.Wait() }() // reaped here; the kill waits on the cluster instead
	c.mu.Lock()
	c.procs[port] = cmd
	c.mu.Unlock()
	probe := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer func() { warn("close redis probe", probe.Close()) }()
	deadline := time.Now().Add(10 * time.Second)
	for probe.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %d did not answer (a port in use? see %s)", port, log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// nodes is CLUSTER NODES as a live node (not skip) sees it: each node's
// port, whether it is a primary, and whether it is marked failed.
type clusterNode struct {
	port            int
	primary, failed bool
}

func (c *clusterSet) nodes(ctx context.Context, skip int) ([]clusterNode, error) {
	var last error
	for i := range clusterNodes {
		port := c.base + i
		if port == skip {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		text, err := cl.ClusterNodes(ctx).Result()
		warn("close redis probe", cl.Close())
		if err != nil {
			last = err
			continue
		}
		var out []clusterNode
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			hostPort, _, _ := strings.Cut(f[1], "@")
			_, p, _ := strings.Cut(hostPort, ":")
			n, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			out = append(out, clusterNode{port: n, primary: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")})
		}
		return out, nil
	}
	return nil, fmt.Errorf("no cluster node answers CLUSTER NODES: %v", last)
}

// waitOK waits until every node but skip says cluster_state:ok and
// three live primaries, skip not among them (marked failed, or a
// replica): a killed primary restarted before its replica took over
// would hand that replica its own empty data set on the resync, and
// the shard would be lost (a first trial did so, 1 s after the kill).
func (c *clusterSet) waitOK(ctx context.Context, skip int) error {
	for ctx.Err() == nil {
		ok := true
		for i := range clusterNodes {
			port := c.base + i
			if port == skip {
				continue
			}
			cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
			info, err := cl.ClusterInfo(ctx).Result()
			warn("close redis probe", cl.Close())
			ok = ok && err == nil && strings.Contains(info, "cluster_state:ok")
		}
		if ns, err := c.nodes(ctx, skip); ok && err == nil && livePrimaries(ns) == 3 && !isLivePrimary(ns, skip) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the cluster did not say cluster_state:ok with three live primaries in time")
}

func isLivePrimary(ns []clusterNode, port int) bool {
	for _, x := range ns {
		if x.port == port && x.primary && !x.failed {
			return true
		}
	}
	return false
}

func livePrimaries(ns []clusterNode) int {
	n := 0
	for _, x := range ns {
		if x.primary && !x.failed {
			n++
		}
	}
	return n
}

// killPrimary kills -9 a primary at random, waits (up to a minute) for
// its replica to take over, then starts it again: it rejoins as a
// replica and syncs.
func (c *clusterSet) killPrimary(ctx context.Context) error {
	ns, err := c.nodes(ctx, -1)
	if err != nil {
		return err
	}
	var primaries []int
	for _, n := range ns {
		if n.primary && !n.failed {
			primaries = append(primaries, n.port)
		}
	}
	if len(primaries) == 0 {
		return errors.New("no live primary")
	}
	victim := primaries[rand.IntN(len(primaries))]
	c.mu.Lock()
	cmd := c.procs[victim]
	c.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitErr := c.waitOK(wctx, victim)
	// Started again whatever happened: a node left dead would end the soak.
	if err := c.startNode(victim - c.base); err != nil {
		return err
	}
	if waitErr != nil {
		return waitErr
	}
	// As with Sentinel: the next kill only once the restarted node has
	// synced, or a shard's data could go with it.
	return waitSynced(ctx, victim, 90*time.Second)
}

func (c *clusterSet) env() []string {
	return []string{"NEWSLETTER_REDIS_CLUSTER_ADDRS=" + strings.Join(c.addrs(), ",")}
}

func (c *clusterSet) client() redis.UniversalClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs(), ClusterStateReloadInterval: time.Second, MaxRetries: 5})
}

func (c *clusterSet) usedMemory(ctx context.Context, u redis.UniversalClient) (float64, error) {
	cl, ok := u.(*redis.ClusterClient)
	if !ok {
		return 0, errors.New("not a cluster client")
	}
	var mu sync.Mutex
	sum := 0.0
	err := cl.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		v, err := usedMemory(ctx, n)
		mu.Lock()
		sum += v
		mu.Unlock()
		return err
	})
	return sum, err
}

func (c *clusterSet) describe() string {
	return fmt.Sprintf("Redis Cluster %d-%d (bus %d-%d)", c.base, c.base+clusterNodes-1, c.busBase, c.busBase+clusterNodes-1)
}

// Stop kills every node.
func (c *clusterSet) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range c.procs {
		_ = cmd.Process.Kill() // may be dead already
	}
}
