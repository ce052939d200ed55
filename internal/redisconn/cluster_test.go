package redisconn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// clusterOpt is the connection config.Parse makes of the cluster's nodes
// given as NEWSLETTER_REDIS_CLUSTER_ADDRS.
func clusterOpt(t *testing.T, c *rediscluster.Cluster) redisconn.Cluster {
	t.Helper()
	var seeds string
	for i, a := range c.Addrs() {
		if i > 0 {
			seeds += ","
		}
		seeds += a
	}
	opt, err := redisconn.ParseCluster(seeds, "")
	if err != nil {
		t.Fatalf("ParseCluster(%q): %v", seeds, err)
	}
	return opt
}

// handled records what a handler saw, payload by payload.
type handled struct {
	mu   sync.Mutex
	seen map[string]int
}

func (h *handled) handler() asynq.Handler {
	return asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.seen == nil {
			h.seen = map[string]int{}
		}
		h.seen[string(task.Payload())]++
		return nil
	})
}

func (h *handled) count(payload string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[payload]
}

// testLogger sends asynq's log to the test's, until the test ends: asynq's
// goroutines may still log while the server shuts down.
type testLogger struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func newTestLogger(t testing.TB) *testLogger {
	l := &testLogger{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *testLogger) log(level string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("asynq %s: %s", level, fmt.Sprint(args...))
	}
}
func (l *testLogger) Debug(args ...any) {}
func (l *testLogger) Info(args ...any)  {}
func (l *testLogger) Warn(args ...any)  { l.log("warn", args...) }
func (l *testLogger) Error(args ...any) { l.log("error", args...) }
func (l *testLogger) Fatal(args ...any) { l.log("fatal", args...) }

// startServer runs an asynq server on opt over queues, stopped when the
// test ends.
func startServer(t *testing.T, opt asynq.RedisConnOpt, h *handled, queues ...string) {
	t.Helper()
	weights := map[string]int{}
	for _, q := range queues {
		weights[q] = 1
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, Queues: weights, Logger: newTestLogger(t)})
	if err := srv.Start(h.handler()); err != nil {
		t.Fatalf("asynq server start: %v", err)
	}
	t.Cleanup(srv.Shutdown)
}

func closeLater(t *testing.T, what string, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("close %s: %v", what, err)
		}
	})
}

// queuesOnTwoPrimaries returns two queue names whose asynq keys (tagged
// {queue}) live on different primaries, so a test covers more than one.
func queuesOnTwoPrimaries(t *testing.T, cl *redis.ClusterClient) [2]string {
	t.Helper()
	ctx := context.Background()
	var first, firstAddr string
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

// TestClusterClients: every client made for a cluster, the app's
// (Client) and asynq's and asynqmon's (MakeRedisClient), is a
// *redis.ClusterClient with the short layout reload, RESP2 and context
// deadlines; the app's has its pool sized.
func TestClusterClients(t *testing.T) {
	opt, err := redisconn.ParseCluster("rediss://app:pw@node1.example:6380,rediss://node2.example:6380", "")
	if err != nil {
		t.Fatal(err)
	}
	app, err := redisconn.Client(opt, 7)
	if err != nil {
		t.Fatal(err)
	}
	made := opt.MakeRedisClient()
	for name, c := range map[string]any{"Client": app, "MakeRedisClient": made} {
		cl, ok := c.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("%s made a %T, want *redis.ClusterClient", name, c)
		}
		o := cl.Options()
		if o.ClusterStateReloadInterval != redisconn.StateReload || o.Protocol != 2 || !o.ContextTimeoutEnabled {
			t.Errorf("%s: reload %s, protocol %d, context deadlines %v; want %s, 2, true", name, o.ClusterStateReloadInterval, o.Protocol, o.ContextTimeoutEnabled, redisconn.StateReload)
		}
		if o.TLSConfig == nil || o.TLSConfig.ServerName != "node1.example" || o.Username != "app" || o.Password != "pw" {
			t.Errorf("%s: TLS %v, user %q, password %q", name, o.TLSConfig, o.Username, o.Password)
		}
		if !slices.Equal(o.Addrs, []string{"node1.example:6380", "node2.example:6380"}) {
			t.Errorf("%s: seeds %q", name, o.Addrs)
		}
		if err := cl.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	if o := app.(*redis.ClusterClient).Options(); o.PoolSize < 7 {
		t.Errorf("the app's pool: %d connections a node, want room for the 7 workers", o.PoolSize)
	}
	if got := opt.String(); got != "rediss://node1.example:6380,rediss://node2.example:6380" {
		t.Errorf("String: %q", got)
	}
}

// TestClusterAsynq: asynq on a real cluster through the RedisConnOpt the
// configuration makes: a client enqueues into two queues on different
// primaries, a server processes every task once, the scheduler's task
// runs, and the Inspector lists the queues.
func TestClusterAsynq(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	opt := clusterOpt(t, c)
	queues := queuesOnTwoPrimaries(t, c.Client(t))
	ctx := context.Background()

	var h handled
	startServer(t, opt, &h, queues[0], queues[1])
	client := asynq.NewClient(opt)
	closeLater(t, "asynq client", client)
	const n = 20
	for i := range n {
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte(strconv.Itoa(i))), asynq.Queue(queues[i%2])); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	sched := asynq.NewScheduler(opt, &asynq.SchedulerOpts{Logger: newTestLogger(t)})
	if _, err := sched.Register("@every 1s", asynq.NewTask("tick", []byte("tick")), asynq.Queue(queues[1])); err != nil {
		t.Fatalf("scheduler register: %v", err)
	}
	if err := sched.Start(); err != nil {
		t.Fatalf("scheduler start: %v", err)
	}
	t.Cleanup(sched.Shutdown)

	insp := asynq.NewInspector(opt)
	closeLater(t, "inspector", insp)
	poll.Until(t, poll.BusyMachine, func() error {
		for i := range n {
			if got := h.count(strconv.Itoa(i)); got != 1 {
				return fmt.Errorf("task %d handled %d times, want 1", i, got)
			}
		}
		if h.count("tick") == 0 {
			return fmt.Errorf("the scheduler's task has not run")
		}
		return nil
	})
	listed, err := insp.Queues()
	if err != nil {
		t.Fatalf("Inspector.Queues: %v", err)
	}
	for _, q := range queues {
		if !slices.Contains(listed, q) {
			t.Errorf("Inspector.Queues: %q lacks %s", listed, q)
		}
	}
	info, err := insp.GetQueueInfo(queues[0])
	if err != nil || info.Processed != n/2 {
		t.Errorf("GetQueueInfo(%s): %+v %v, want %d processed", queues[0], info, err, n/2)
	}
}

// TestClusterAsynqmon: asynqmon, mounted as serve.go mounts it, answers
// its queues API and its Redis info API on the cluster: the info page is
// the cluster's (asynqmon picks it by the client's type), with where each
// queue lives.
func TestClusterAsynqmon(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	opt := clusterOpt(t, c)
	client := asynq.NewClient(opt)
	closeLater(t, "asynq client", client)
	if _, err := client.Enqueue(asynq.NewTask("t", nil), asynq.Queue("monitored")); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt, ReadOnly: true})
	closeLater(t, "asynqmon", mon)
	srv := httptest.NewServer(mon)
	t.Cleanup(srv.Close)

	var queues struct {
		Queues []struct {
			Queue   string `json:"queue"`
			Pending int    `json:"pending"`
		} `json:"queues"`
	}
	getJSON(t, srv.URL+"/monitoring/api/queues", &queues)
	if len(queues.Queues) != 1 || queues.Queues[0].Queue != "monitored" || queues.Queues[0].Pending != 1 {
		t.Errorf("/api/queues: %+v, want monitored with 1 pending", queues.Queues)
	}

	var info struct {
		Cluster        bool `json:"cluster"`
		QueueLocations []struct {
			Queue string   `json:"queue"`
			Nodes []string `json:"nodes"`
		} `json:"queue_locations"`
		Info map[string]string `json:"info"`
	}
	getJSON(t, srv.URL+"/monitoring/api/redis_info", &info)
	if !info.Cluster || info.Info["cluster_state"] != "ok" {
		t.Errorf("/api/redis_info: cluster %v, cluster_state %q; want the cluster's page", info.Cluster, info.Info["cluster_state"])
	}
	if len(info.QueueLocations) != 1 || info.QueueLocations[0].Queue != "monitored" || len(info.QueueLocations[0].Nodes) == 0 {
		t.Errorf("/api/redis_info queue locations: %+v", info.QueueLocations)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestClusterFailover: the primary that holds a queue dies; its replica
// takes over, and through the same clients (the app's, from Client, for
// enqueueing; a server made from the RedisConnOpt for processing) tasks
// are enqueued and processed again. Each enqueue after the kill that
// succeeded is processed: a write the client was told succeeded went to
// the new primary.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	opt := clusterOpt(t, c)
	const q = "mail"
	ctx := context.Background()

	rdb, err := redisconn.Client(opt, 4)
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, "app client", rdb)
	client := asynq.NewClientFromRedisClient(rdb) // as the app makes its
	var h handled
	startServer(t, opt, &h, q)
	if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte("before")), asynq.Queue(q)); err != nil {
		t.Fatalf("enqueue before the kill: %v", err)
	}
	poll.True(t, poll.BusyMachine, "the task enqueued before the kill processed", func() bool { return h.count("before") == 1 })

	killed := c.KillPrimaryOf(t, "asynq:{"+q+"}:pending")
	t.Logf("killed %s, the primary of queue %s", killed, q)

	// The clients meet errors until they reload the layout (StateReload);
	// every attempt enqueues a payload of its own.
	var enqueued []string
	attempt := 0
	poll.Until(t, poll.BusyMachine, func() error {
		attempt++
		p := "after" + strconv.Itoa(attempt)
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("t", []byte(p)), asynq.Queue(q)); err != nil {
			return fmt.Errorf("enqueue after the kill: %w", err)
		}
		enqueued = append(enqueued, p)
		if len(enqueued) < 3 {
			return fmt.Errorf("%d enqueued after the kill, want 3", len(enqueued))
		}
		return nil
	})
	poll.Until(t, poll.BusyMachine, func() error {
		for _, p := range enqueued {
			if h.count(p) == 0 {
				return fmt.Errorf("%s, enqueued after the kill, not processed", p)
			}
		}
		return nil
	})
	primary, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, "asynq:{"+q+"}:pending")
	if err != nil {
		t.Fatalf("MasterForKey: %v", err)
	}
	if primary.Options().Addr == killed {
		t.Errorf("the app's client still takes %s, killed, for the queue's primary", killed)
	}
}
