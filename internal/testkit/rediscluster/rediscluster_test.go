package rediscluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// Without redis-server on the PATH, Start skips the test and says what to
// install, so `make test` passes on a machine with nothing but Go.
func TestSkipsWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var inner *testing.T
	t.Run("start", func(t *testing.T) {
		inner = t
		rediscluster.Start(t)
		t.Fatal("Start returned without redis-server on the PATH")
	})
	if !inner.Skipped() {
		t.Fatal("Start did not skip without redis-server")
	}
}

// The cluster serves every slot from three primaries, each with a replica,
// and a cluster client writes and reads keys that land on each of them.
func TestStartServesEverySlot(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	if got := len(c.Addrs()); got != 6 {
		t.Fatalf("Addrs: %d nodes, want 6", got)
	}
	cl := c.Client(t)
	ctx := context.Background()

	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	covered, owners := 0, map[string]bool{}
	for _, s := range slots {
		covered += int(s.End - s.Start + 1)
		owners[s.Nodes[0].Addr] = true
	}
	if covered != rediscluster.Slots || len(owners) != 3 {
		t.Fatalf("%d slots covered by %d primaries, want %d by 3", covered, len(owners), rediscluster.Slots)
	}
	// The replicas are counted in CLUSTER NODES: CLUSTER SLOTS (Redis 7.0)
	// leaves out a replica until it has replicated a first write.
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	replicaOf := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		if f := strings.Fields(line); len(f) > 3 && strings.Contains(f[2], "slave") {
			replicaOf[f[3]]++
		}
	}
	for _, s := range slots {
		if n := replicaOf[s.Nodes[0].ID]; n != 1 {
			t.Errorf("primary %s has %d replicas, want 1", s.Nodes[0].Addr, n)
		}
	}

	// Write keys until each primary holds one, then read them back through
	// the cluster client and on the primary itself.
	byPrimary := map[string]string{}
	for i := 0; len(byPrimary) < 3; i++ {
		if i == 1000 {
			t.Fatalf("1000 keys landed on only %d primaries", len(byPrimary))
		}
		key := "k" + strconv.Itoa(i)
		if err := cl.Set(ctx, key, "v"+key, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		primary, err := cl.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey %s: %v", key, err)
		}
		if _, ok := byPrimary[primary.Options().Addr]; !ok {
			byPrimary[primary.Options().Addr] = key
		}
	}
	for addr, key := range byPrimary {
		if v, err := cl.Get(ctx, key).Result(); err != nil || v != "v"+key {
			t.Errorf("GET %s through the cluster client: %q %v", key, v, err)
		}
		node := redis.NewClient(&redis.Options{Addr: addr})
		v, err := node.Get(ctx, key).Result()
		if cerr := node.Close(); cerr != nil {
			t.Errorf("close: %v", cerr)
		}
		if err != nil || v != "v"+key {
			t.Errorf("GET %s on its primary %s: %q %v", key, addr, v, err)
		}
	}
}

// A script runs on a cluster only if all its keys hash to one slot: keys
// that share a hash tag ({s07}) do, others are refused with CROSSSLOT
// before the script runs. This is why the store's scripts need their keys
// tagged per shard before the service can use a cluster.
func TestScriptKeysMustShareASlot(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	cl := c.Client(t)
	ctx := context.Background()
	setBoth := redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
return redis.call('MGET', KEYS[1], KEYS[2])`)

	got, err := setBoth.Run(ctx, cl, []string{"{s07}:a", "{s07}:b"}, "x").StringSlice()
	if err != nil || !slices.Equal(got, []string{"x", "x"}) {
		t.Fatalf("script on {s07}:a, {s07}:b: %q %v", got, err)
	}

	a, b := "s07:a", "s07:b"
	sa, err1 := cl.ClusterKeySlot(ctx, a).Result()
	sb, err2 := cl.ClusterKeySlot(ctx, b).Result()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	if sa == sb {
		t.Fatalf("%s and %s share slot %d; the test needs two slots", a, b, sa)
	}
	err = setBoth.Run(ctx, cl, []string{a, b}, "x").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("script on %s (slot %d) and %s (slot %d): %v, want CROSSSLOT", a, sa, b, sb, err)
	}
	if n, err := cl.Exists(ctx, a).Result(); err != nil || n != 0 {
		t.Fatalf("after the refused script %s exists: %d %v", a, n, err)
	}
}

// asynq runs on the cluster: a client and a server from AsynqOpt process
// 100 tasks in two queues whose keys live on different primaries, each
// task once, and the Inspector sees both queues drained.
func TestAsynqOnCluster(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	ctx := context.Background()
	queues := queuesOnTwoPrimaries(t, c.Client(t))

	client := asynq.NewClient(c.AsynqOpt())
	t.Cleanup(func() {
		if err := client.Close(); err != nil {
			t.Logf("asynq client close: %v", err)
		}
	})
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	srv := asynq.NewServer(c.AsynqOpt(), asynq.Config{
		Concurrency: 10,
		Queues:      map[string]int{queues[0]: 1, queues[1]: 1},
		LogLevel:    asynq.WarnLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		mu.Lock()
		defer mu.Unlock()
		seen[string(task.Payload())]++
		return nil
	})); err != nil {
		t.Fatalf("asynq server start: %v", err)
	}
	t.Cleanup(srv.Shutdown)

	const n = 100
	for i := range n {
		q := queues[i%2]
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte(strconv.Itoa(i))), asynq.Queue(q)); err != nil {
			t.Fatalf("enqueue %d on %s: %v", i, q, err)
		}
	}

	insp := asynq.NewInspector(c.AsynqOpt())
	t.Cleanup(func() {
		if err := insp.Close(); err != nil {
			t.Logf("inspector close: %v", err)
		}
	})
	// Done when asynq counts every task processed and nothing left in any
	// state: a task run twice would count twice, one lost would leave the
	// count short.
	poll.Until(t, poll.BusyMachine, func() error {
		for _, q := range queues {
			info, err := insp.GetQueueInfo(q)
			if err != nil {
				return err
			}
			if info.Processed != n/2 || info.Size != 0 || info.Active != 0 {
				return fmt.Errorf("queue %s: %d processed, %d left (%d active), want %d and 0", q, info.Processed, info.Size, info.Active, n/2)
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if got := seen[strconv.Itoa(i)]; got != 1 {
			t.Errorf("task %d handled %d times, want 1", i, got)
		}
	}
	listed, err := insp.Queues()
	if err != nil {
		t.Fatalf("Inspector.Queues: %v", err)
	}
	slices.Sort(listed)
	if want := slices.Sorted(slices.Values(queues[:])); !slices.Equal(listed, want) {
		t.Errorf("Inspector.Queues: %q, want %q", listed, want)
	}
}

// queuesOnTwoPrimaries returns two queue names whose asynq keys (tagged
// {queue}) hash to slots on different primaries.
func queuesOnTwoPrimaries(t *testing.T, cl *redis.ClusterClient) [2]string {
	t.Helper()
	ctx := context.Background()
	first := ""
	firstAddr := ""
	for i := range 100 {
		q := "q" + strconv.Itoa(i)
		primary, err := cl.MasterForKey(ctx, "asynq:{"+q+"}:pending")
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		switch addr := primary.Options().Addr; {
		case first == "":
			first, firstAddr = q, addr
		case addr != firstAddr:
			return [2]string{first, q}
		}
	}
	t.Fatal("100 queue names all hash to one primary")
	return [2]string{}
}

// After KillPrimaryOf, the key's replica serves it as the new primary: a
// value the old primary had replicated (WAIT) is read back through the
// same cluster client, and writes to that slot and others succeed.
func TestKillPrimaryOf(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	cl := c.Client(t)
	ctx := context.Background()
	const key = "{s07}:sent"

	primary, err := cl.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("MasterForKey: %v", err)
	}
	before := primary.Options().Addr
	// WAIT counts the replicas that acknowledged this connection's writes,
	// so SET and WAIT go down one connection: a pipeline on the primary.
	// Its bound (2 s) stays under the client's read timeout; a replica
	// slower than that is asked again.
	poll.Until(t, poll.BusyMachine, func() error {
		var wait *redis.Cmd
		if _, err := primary.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, "42", 0)
			wait = p.Do(ctx, "WAIT", 1, 2000)
			return nil
		}); err != nil {
			return err
		}
		if n, err := wait.Int(); err != nil || n != 1 {
			return fmt.Errorf("WAIT: %d replicas acknowledged (%v), want 1", n, err)
		}
		return nil
	})

	killed := c.KillPrimaryOf(t, key)
	if killed != before {
		t.Fatalf("KillPrimaryOf killed %s, but %s served %s", killed, before, key)
	}
	if got := c.Addrs(); len(got) != 5 || slices.Contains(got, killed) {
		t.Fatalf("Addrs after the kill: %q, want the 5 others", got)
	}
	// The client still has the old layout; it learns the new one from the
	// errors it meets, so the first reads may fail.
	poll.Until(t, poll.BusyMachine, func() error {
		v, err := cl.Get(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if v != "42" {
			return fmt.Errorf("GET %s: %q, want 42 (what the killed primary had replicated)", key, v)
		}
		return nil
	})
	now, err := cl.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("MasterForKey after the failover: %v", err)
	}
	if now.Options().Addr == killed {
		t.Fatalf("the client still takes %s for the primary of %s", killed, key)
	}
	for i := range 30 {
		k := "{s07}:after" + strconv.Itoa(i)
		if i%2 == 1 {
			k = "after" + strconv.Itoa(i) // other slots, other primaries
		}
		if err := cl.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatalf("SET %s after the failover: %v", k, err)
		}
	}
}
