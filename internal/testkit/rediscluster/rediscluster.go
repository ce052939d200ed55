// Package rediscluster starts a real Redis Cluster for a test: three
// primaries and three replicas, each a `redis-server --cluster-enabled yes`
// process on a loopback port, joined by `redis-cli --cluster create`.
//
// The service is to run on Redis Cluster (issue #30), and what a cluster
// does differently cannot be seen on one Redis or on miniredis: a script or
// transaction whose keys hash to different slots is refused (CROSSSLOT), a
// client is sent MOVED to the node that owns a key, and a primary that dies
// is replaced by its replica after a failover the client has to ride out.
// miniredis answers the CLUSTER commands as a single node owning every
// slot and enforces none of this, so these tests need redis-server; without
// it (or redis-cli) they skip and say what to install.
//
// Each node takes two ports: its client port and its cluster bus port.
// They are picked free on 127.0.0.1 (or from NEWSLETTER_TEST_CLUSTER_PORTS,
// "lo-hi", or the PortRange option), never handed out twice within the
// test binary, and a node whose port another process took in the meantime
// is started again on new ones.
package rediscluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// EnvPorts names the variable that confines the nodes' ports to a range,
// "lo-hi" inclusive, for a machine where only some ports may be used.
const EnvPorts = "NEWSLETTER_TEST_CLUSTER_PORTS"

// Slots is the number of hash slots a Redis Cluster divides its keys into.
const Slots = 16384

const (
	primaries = 3
	nodeCount = primaries * 2 // one replica per primary
	// nodeTimeout is how long a node may be unreachable before the others
	// take it for failed. Redis's default, 15 s, would make every failover
	// test wait that long; 2 s still rides out a busy machine's pauses.
	nodeTimeout = 2000 * time.Millisecond
	// wait bounds every wait for the cluster (a node answering, the
	// cluster agreeing, a failover): see poll.BusyMachine.
	wait = poll.BusyMachine
)

// Option changes how Start builds the cluster.
type Option func(*options)

type options struct {
	lo, hi int // port range; 0, 0: any free port
}

// PortRange confines the nodes' client and bus ports to [lo, hi]; it
// needs 12 free ports there. It overrides NEWSLETTER_TEST_CLUSTER_PORTS.
func PortRange(lo, hi int) Option {
	return func(o *options) { o.lo, o.hi = lo, hi }
}

// Cluster is a running Redis Cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	port, bus int
	dir       string
	cmd       *exec.Cmd
	exited    chan struct{} // closed once the process has been waited for
	killed    bool          // by KillPrimaryOf: no longer part of the cluster
}

func (n *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Start starts the cluster and returns once every node reports
// cluster_state:ok with all 16384 slots served and every replica in sync
// with its primary, so a test can count on WAIT and on a failover. The
// processes are killed when the test ends.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found: install redis-server (Debian package redis-server) to run the Redis Cluster tests", bin)
		}
	}
	var o options
	if raw := os.Getenv(EnvPorts); raw != "" {
		lo, hi, ok := parseRange(raw)
		if !ok {
			t.Fatalf("rediscluster: %s=%q, want lo-hi", EnvPorts, raw)
		}
		o.lo, o.hi = lo, hi
	}
	for _, opt := range opts {
		opt(&o)
	}
	ownBus := busPortOption(t)

	// Made before the cleanup below is registered, so it is removed after
	// that cleanup has shown the logs in it (cleanups run last first).
	root := t.TempDir()
	c := &Cluster{}
	// Registered before any node starts, so a Fatal half way still kills
	// what did start; the logs are shown when the test failed, since a
	// node's log is where a failed start or failover is explained.
	t.Cleanup(func() {
		c.stop(t)
		if t.Failed() {
			c.showLogs(t)
		}
	})
	for i := range nodeCount {
		n := &node{dir: filepath.Join(root, "node"+strconv.Itoa(i))}
		if err := os.Mkdir(n.dir, 0o755); err != nil {
			t.Fatalf("rediscluster: %v", err)
		}
		c.mu.Lock()
		c.nodes = append(c.nodes, n)
		c.mu.Unlock()
		c.startNode(t, n, o, ownBus)
	}

	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("rediscluster: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitReady(t)
	return c
}

// busPortOption says whether redis-server takes cluster-port (7.0 on):
// without it the bus port is the client port + 10000, which port picking
// then has to keep free too.
func busPortOption(t testing.TB) bool {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		t.Fatalf("rediscluster: redis-server --version: %v", err)
	}
	m := regexp.MustCompile(`v=(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("rediscluster: no version in %q", out)
	}
	major, _ := strconv.Atoi(string(m[1])) // digits, by the pattern
	return major >= 7
}

func parseRange(s string) (lo, hi int, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// startNode starts n's redis-server and waits for it to answer PING. A
// port picked free may be taken by another process before redis-server
// binds it (the machine runs other tests); the node then exits, and is
// started again on other ports.
func (c *Cluster) startNode(t testing.TB, n *node, o options, ownBus bool) {
	t.Helper()
	const attempts = 5
	for try := 1; ; try++ {
		n.port, n.bus = pickPorts(t, o, ownBus)
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
logfile %s
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout %d
cluster-replica-validity-factor 0
appendonly no
save ""
repl-diskless-sync yes
repl-diskless-sync-delay 0
`, n.port, n.dir, filepath.Join(n.dir, "redis.log"), nodeTimeout.Milliseconds())
		// cluster-replica-validity-factor 0: a replica may always be
		// promoted, however long it was cut off, so a failover never
		// depends on timing. repl-diskless-sync-delay 0: a replica's
		// first sync starts at once instead of after 5 s.
		if ownBus {
			conf += fmt.Sprintf("cluster-port %d\n", n.bus)
		}
		path := filepath.Join(n.dir, "redis.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatalf("rediscluster: %v", err)
		}
		// A node from an attempt that failed left its nodes.conf; a new
		// attempt must start as a fresh node.
		if err := os.Remove(filepath.Join(n.dir, "nodes.conf")); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("rediscluster: %v", err)
		}
		cmd := exec.Command("redis-server", path)
		setProcAttr(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("rediscluster: start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			// The exit status says nothing a test needs: the log does,
			// and Cleanup kills the process anyway.
			_ = cmd.Wait()
			close(exited)
		}()
		c.mu.Lock()
		n.cmd, n.exited = cmd, exited
		c.mu.Unlock()

		err := waitPing(n)
		if err == nil {
			return
		}
		log := readLog(n)
		if !strings.Contains(log, "Address already in use") || try == attempts {
			t.Fatalf("rediscluster: node on port %d: %v\nits log:\n%s", n.port, err, log)
		}
		t.Logf("rediscluster: port %d or %d was taken before redis-server bound it; trying others", n.port, n.bus)
		release(n.port, n.bus)
	}
}

// waitPing waits until n answers PING, or its process exits.
func waitPing(n *node) error {
	cl := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = cl.Close() }() // nothing was written through it
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-n.exited:
			return errors.New("redis-server exited")
		default:
		}
		err := cl.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG after %s: %w", wait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ports handed out in this test binary and not yet released: tests that
// run in parallel each start a cluster, and a port freed by closing a
// listener would otherwise be picked again at once.
var (
	portsMu sync.Mutex
	taken   = map[int]bool{}
)

// pickPorts returns a free client port and bus port, held in taken until
// the cluster stops.
func pickPorts(t testing.TB, o options, ownBus bool) (port, bus int) {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	one := func() int {
		if o.lo == 0 {
			return anyFree(t)
		}
		return freeInRange(t, o.lo, o.hi)
	}
	for range 1000 {
		port = one()
		if ownBus {
			bus = one()
		} else {
			bus = port + 10000
			if bus > 65535 || taken[bus] || !free(bus) {
				continue
			}
		}
		if port == bus {
			continue
		}
		taken[port], taken[bus] = true, true
		return port, bus
	}
	t.Fatalf("rediscluster: no two free ports found")
	return 0, 0
}

// anyFree asks the kernel for a port, skipping those already handed out.
func anyFree(t testing.TB) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("rediscluster: listen: %v", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			t.Fatalf("rediscluster: close: %v", err)
		}
		if !taken[p] {
			return p
		}
	}
}

// freeInRange scans [lo, hi] from a random place, so binaries started
// side by side rarely try the same port first.
func freeInRange(t testing.TB, lo, hi int) int {
	t.Helper()
	size := hi - lo + 1
	start := rand.IntN(size)
	for i := range size {
		p := lo + (start+i)%size
		if !taken[p] && free(p) {
			return p
		}
	}
	t.Fatalf("rediscluster: no free port in %d-%d (a cluster needs 12)", lo, hi)
	return 0
}

func free(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	return ln.Close() == nil
}

// waitReady polls every node until the cluster is whole: each node says
// cluster_state:ok with every slot served and knows all six nodes, three
// primaries own slots, and every replica's link to its primary is up (a
// replica still in its first sync would answer WAIT with 0).
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	poll.Until(t, wait, func() error {
		for _, n := range c.live() {
			if err := clusterOK(ctx, n, nodeCount); err != nil {
				return err
			}
			view, err := nodesView(ctx, n)
			if err != nil {
				return err
			}
			if err := view.whole(); err != nil {
				return fmt.Errorf("%s: %w", n.addr(), err)
			}
			info, err := do(ctx, n, "INFO", "replication")
			if err != nil {
				return err
			}
			if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
				return fmt.Errorf("replica %s not yet in sync with its primary", n.addr())
			}
		}
		return nil
	})
}

// clusterOK says whether n reports the cluster whole: state ok, every slot
// served, and (known > 0) that many nodes known.
func clusterOK(ctx context.Context, n *node, known int) error {
	info, err := do(ctx, n, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:" + strconv.Itoa(Slots)} {
		if !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("%s: CLUSTER INFO lacks %s:\n%s", n.addr(), want, info)
		}
	}
	if known > 0 && !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(known)+"\r\n") {
		return fmt.Errorf("%s does not yet know all %d nodes:\n%s", n.addr(), known, info)
	}
	return nil
}

// do sends one command to one node on a connection of its own: the kit
// asks each node for its own view, which a cluster client would not.
func do(ctx context.Context, n *node, args ...any) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1})
	defer func() { _ = cl.Close() }() // read-only use
	v, err := cl.Do(ctx, args...).Text()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %w", n.addr(), args, err)
	}
	return v, nil
}

func keySlot(ctx context.Context, n *node, key string) (int64, error) {
	cl := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1})
	defer func() { _ = cl.Close() }() // read-only use
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("%s: CLUSTER KEYSLOT %q: %w", n.addr(), key, err)
	}
	return slot, nil
}

// view is one node's CLUSTER NODES.
type view []viewNode

type viewNode struct {
	id, addr string
	flags    []string
	primary  string // the primary's id, for a replica
	slots    [][2]int
}

func (v viewNode) is(flag string) bool {
	for _, f := range v.flags {
		if f == flag {
			return true
		}
	}
	return false
}

func (v view) primaries() []viewNode {
	var out []viewNode
	for _, n := range v {
		if n.is("master") && len(n.slots) > 0 && !n.is("fail") {
			out = append(out, n)
		}
	}
	return out
}

// whole says whether the view has three primaries owning slots, each with
// a replica of its own: replicas are made by redis-cli after the slots are
// assigned, and each node learns of them by gossip, later.
func (v view) whole() error {
	ps := v.primaries()
	if len(ps) != primaries {
		return fmt.Errorf("%d primaries owning slots, want %d", len(ps), primaries)
	}
	for _, p := range ps {
		replicas := 0
		for _, n := range v {
			if n.is("slave") && n.primary == p.id && !n.is("fail") {
				replicas++
			}
		}
		if replicas != 1 {
			return fmt.Errorf("primary %s has %d replicas, want 1", p.addr, replicas)
		}
	}
	return nil
}

// owner returns the node that view says serves slot.
func (v view) owner(slot int) (viewNode, bool) {
	for _, n := range v {
		for _, r := range n.slots {
			if r[0] <= slot && slot <= r[1] {
				return n, true
			}
		}
	}
	return viewNode{}, false
}

func nodesView(ctx context.Context, n *node) (view, error) {
	text, err := do(ctx, n, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	return parseNodes(text)
}

// parseNodes reads CLUSTER NODES: "<id> <ip:port@cport[,hostname]>
// <flags> <primary> <ping-sent> <pong-recv> <epoch> <link> <slot>...".
func parseNodes(text string) (view, error) {
	var v view
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q: too few fields", sc.Text())
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := viewNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), primary: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated, not served
			}
			a, b, isRange := strings.Cut(s, "-")
			lo, err := strconv.Atoi(a)
			if err != nil {
				return nil, fmt.Errorf("CLUSTER NODES slot %q: %v", s, err)
			}
			hi := lo
			if isRange {
				if hi, err = strconv.Atoi(b); err != nil {
					return nil, fmt.Errorf("CLUSTER NODES slot %q: %v", s, err)
				}
			}
			n.slots = append(n.slots, [2]int{lo, hi})
		}
		v = append(v, n)
	}
	return v, sc.Err()
}

// live returns the nodes KillPrimaryOf has not killed.
func (c *Cluster) live() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		if !n.killed && n.cmd != nil {
			out = append(out, n)
		}
	}
	return out
}

// Addrs returns the addresses of the nodes still running, primaries and
// replicas: the seed list a client is given.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.live() {
		out = append(out, n.addr())
	}
	return out
}

// StateReload is how often Client's cluster client reloads the cluster's
// layout (which node serves which slot) besides when a node answers MOVED.
// go-redis's default is a minute, and a primary that dies answers nothing:
// a client with the default kept sending that primary's slots to its dead
// address for up to a minute after the replica had taken over (go-redis
// v9.23; the failover itself took some 4 s). The service's own cluster
// client needs a short interval too.
const StateReload = time.Second

// Options returns the options of a cluster client seeded with every
// running node, its layout reloaded every StateReload.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: StateReload}
}

// Client returns a cluster client made from Options, closed when the test
// ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(c.Options())
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Logf("rediscluster: close client: %v", err)
		}
	})
	return cl
}

// AsynqOpt returns what asynq.NewClient, NewServer and NewInspector take
// to use the cluster. The client asynq makes from it has go-redis's
// minute-long StateReload, which RedisClusterClientOpt cannot change: a
// test that kills a primary under asynq gives it a client of its own
// instead (asynq.NewClientFromRedisClient, NewServerFromRedisClient and
// NewInspectorFromRedisClient take Client's).
func (c *Cluster) AsynqOpt() asynq.RedisClusterClientOpt {
	return asynq.RedisClusterClientOpt{Addrs: c.Addrs()}
}

// KillPrimaryOf kills (SIGKILL, as a crash would) the primary that serves
// key's slot, and returns its address once the cluster has replaced it:
// every surviving node says cluster_state:ok again and names a live
// primary, the killed one's replica, for the slot. A client that kept
// talking to the killed node meets errors until it learns the new layout;
// that is what a test of a primary lost mid-send is about.
func (c *Cluster) KillPrimaryOf(t testing.TB, key string) (killed string) {
	t.Helper()
	ctx := context.Background()
	live := c.live()
	if len(live) == 0 {
		t.Fatalf("rediscluster: no node left running")
	}
	slot, err := keySlot(ctx, live[0], key)
	if err != nil {
		t.Fatalf("rediscluster: %v", err)
	}
	v, err := nodesView(ctx, live[0])
	if err != nil {
		t.Fatalf("rediscluster: %v", err)
	}
	owner, ok := v.owner(int(slot))
	if !ok {
		t.Fatalf("rediscluster: no node serves slot %d of %q", slot, key)
	}
	// A primary without a replica (the one that replaced a primary killed
	// before) leaves its slots unserved when killed: the cluster would
	// never be whole again.
	hasReplica := false
	for _, n := range v {
		if n.is("slave") && n.primary == owner.id && !n.is("fail") {
			hasReplica = true
		}
	}
	if !hasReplica {
		t.Fatalf("rediscluster: slot %d's primary %s has no replica to take over; kill the primary of a slot that has one", slot, owner.addr)
	}
	var victim *node
	for _, n := range live {
		if n.addr() == owner.addr {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("rediscluster: slot %d's primary %s is not one of this cluster's running nodes", slot, owner.addr)
	}
	// Taken off the live list first, so nothing below asks it.
	c.mu.Lock()
	victim.killed = true
	c.mu.Unlock()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("rediscluster: kill %s: %v", owner.addr, err)
	}
	<-victim.exited

	poll.Until(t, wait, func() error {
		for _, n := range c.live() {
			if err := clusterOK(ctx, n, 0); err != nil {
				return err
			}
			v, err := nodesView(ctx, n)
			if err != nil {
				return err
			}
			now, ok := v.owner(int(slot))
			if !ok || now.id == owner.id || !now.is("master") || now.is("fail") || now.is("pfail") {
				return fmt.Errorf("%s does not yet name a new primary for slot %d (was %s): %+v", n.addr(), slot, owner.addr, now)
			}
		}
		return nil
	})
	return owner.addr
}

// stop kills every node still running and waits for it, then gives its
// ports back.
func (c *Cluster) stop(t testing.TB) {
	c.mu.Lock()
	nodes := append([]*node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n.cmd == nil {
			continue
		}
		// An error here is the process being gone already (killed, or
		// exited on a failed start); the wait below covers both.
		_ = n.cmd.Process.Kill()
		select {
		case <-n.exited:
		case <-time.After(wait):
			t.Errorf("rediscluster: redis-server on port %d did not exit after SIGKILL", n.port)
		}
	}
	for _, n := range nodes {
		release(n.port, n.bus)
	}
}

// release gives ports back to pickPorts.
func release(ports ...int) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for _, p := range ports {
		delete(taken, p)
	}
}

func (c *Cluster) showLogs(t testing.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		t.Logf("rediscluster: log of the node on port %d:\n%s", n.port, readLog(n))
	}
}

// readLog returns the end of n's log: enough for why it stopped or why a
// failover did not happen.
func readLog(n *node) string {
	b, err := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
