package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis servers of a run: a 3-primary/3-replica Redis Cluster and a
// single Redis with a replica of its own beside it (as a single Redis
// runs for real, under Sentinel: its primary feeds a replica, as each of
// the cluster's does, so the two are compared like for like), each a
// redis-server process of this program's, on ports of its own
// (PORT_BASE: nodes at base..base+5, their cluster buses at
// base+10..base+15, the single Redis at base+20, its replica at
// base+21). They keep
// nothing on disk (save '', no AOF) and die with this program
// (Pdeathsig), so an interrupted run leaves no server holding gigabytes.

// server is one redis-server process.
type server struct {
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	rdb    *redis.Client // a plain connection to this server alone: INFO
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// servers is every redis-server the run started.
type servers struct {
	root    string
	cluster []*server
	single  *server
	// singleReplica replicates single.
	singleReplica *server
}

// nodeConf is what every server runs with. The node timeout is Redis's
// default, 15 s, not the tests' 2 s: on two busy cores a node that
// stalls for a few seconds under a 10M import must not be failed over
// (a failover would move a primary mid-measurement; runs check the
// primaries did not change). The replication backlog stays at its 1 MB
// default: it is counted in used_memory, and the memory figure subtracts
// it anyway (memory.go).
func nodeConf(port int, dir string, cluster bool, replicaOf int) string {
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
logfile %s
appendonly no
save ""
repl-diskless-sync yes
repl-diskless-sync-delay 0
`, port, dir, filepath.Join(dir, "redis.log"))
	if replicaOf > 0 {
		conf += fmt.Sprintf("replicaof 127.0.0.1 %d\n", replicaOf)
	}
	if cluster {
		conf += fmt.Sprintf("cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 15000\ncluster-port %d\n", port+10)
	}
	return conf
}

// startServers starts the six cluster nodes and the single Redis,
// joins the nodes with redis-cli --cluster create, and waits until the
// cluster is whole. On error, what did start is stopped.
func startServers(ctx context.Context, base int) (_ *servers, err error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found: install redis-server (Debian package redis-server)", bin)
		}
	}
	root, err := os.MkdirTemp("", "bench-scale")
	if err != nil {
		return nil, err
	}
	all := &servers{root: root}
	defer func() {
		if err != nil {
			all.stop()
		}
	}()
	for i := range 6 {
		s, err := startServer(ctx, base+i, filepath.Join(root, "node"+strconv.Itoa(i)), true, 0)
		if err != nil {
			return all, err
		}
		all.cluster = append(all.cluster, s)
	}
	if all.single, err = startServer(ctx, base+20, filepath.Join(root, "single"), false, 0); err != nil {
		return all, err
	}
	if all.singleReplica, err = startServer(ctx, base+21, filepath.Join(root, "single-replica"), false, base+20); err != nil {
		return all, err
	}
	args := []string{"--cluster", "create"}
	for _, s := range all.cluster {
		args = append(args, s.addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return all, fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return all, all.waitCluster(ctx)
}

func startServer(ctx context.Context, port int, dir string, cluster bool, replicaOf int) (*server, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(nodeConf(port, dir, cluster, replicaOf)), 0o644); err != nil {
		return nil, err
	}
	s := &server{port: port, dir: dir, exited: make(chan struct{})}
	s.cmd = exec.Command("redis-server", path)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		// The exit status says nothing: its log does (logTail).
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	s.rdb = redis.NewClient(&redis.Options{Addr: s.addr(), Protocol: 2, MaxRetries: -1})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-s.exited:
			return s, fmt.Errorf("redis-server on port %d exited (is the port taken?):\n%s", port, s.logTail())
		default:
		}
		if s.rdb.Ping(ctx).Err() == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("redis-server on port %d does not answer:\n%s", port, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCluster polls until every node reports the cluster whole and each
// replica (the single Redis's too) is linked to its primary.
func (a *servers) waitCluster(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := func() error {
			repl, err := a.singleReplica.rdb.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: the single Redis's replica not yet in sync", a.singleReplica.addr())
			}
			for _, s := range a.cluster {
				info, err := s.rdb.ClusterInfo(ctx).Result()
				if err != nil {
					return err
				}
				if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
					return fmt.Errorf("%s: cluster not yet whole", s.addr())
				}
				repl, err := s.rdb.Info(ctx, "replication").Result()
				if err != nil {
					return err
				}
				if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
					return fmt.Errorf("%s: replica not yet in sync", s.addr())
				}
			}
			if p, err := a.primaries(ctx); err != nil || len(p) != 3 {
				return fmt.Errorf("%d primaries (%v), want 3", len(p), err)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not come up: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// primaries are the cluster nodes that say role:master, in port order.
func (a *servers) primaries(ctx context.Context) ([]*server, error) {
	var out []*server
	for _, s := range a.cluster {
		info, err := s.rdb.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.addr(), err)
		}
		if strings.Contains(info, "role:master") {
			out = append(out, s)
		}
	}
	return out, nil
}

// replicas are the other cluster nodes.
func (a *servers) replicas(ctx context.Context) ([]*server, error) {
	p, err := a.primaries(ctx)
	if err != nil {
		return nil, err
	}
	var out []*server
	for _, s := range a.cluster {
		isPrimary := false
		for _, q := range p {
			isPrimary = isPrimary || q == s
		}
		if !isPrimary {
			out = append(out, s)
		}
	}
	return out, nil
}

// seeds is NEWSLETTER_REDIS_CLUSTER_ADDRS for the cluster.
func (a *servers) seeds() string {
	var s []string
	for _, n := range a.cluster {
		s = append(s, n.addr())
	}
	return strings.Join(s, ",")
}

// stop kills every server (their data is a benchmark's, nothing to
// save) and removes their folder.
func (a *servers) stop() {
	for _, s := range append(append([]*server(nil), a.cluster...), a.single, a.singleReplica) {
		if s == nil || s.cmd == nil || s.cmd.Process == nil {
			continue
		}
		if s.rdb != nil {
			warn("close client", s.rdb.Close())
		}
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			warn("kill redis-server", err)
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			warn("redis-server", fmt.Errorf("port %d did not exit after SIGKILL", s.port))
		}
	}
	warn("remove the servers' folder", os.RemoveAll(a.root))
}

// logTail is the end of s's log: why it did not start.
func (s *server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// infoFields reads INFO sections of s as name -> value.
func infoFields(ctx context.Context, s *server, sections ...string) (map[string]string, error) {
	info, err := s.rdb.Info(ctx, sections...).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: INFO: %w", s.addr(), err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// cpuOf is s's used_cpu_sys + used_cpu_user (INFO cpu): what the server
// has spent so far, in µs resolution.
func cpuOf(ctx context.Context, s *server) (time.Duration, error) {
	f, err := infoFields(ctx, s, "cpu")
	if err != nil {
		return 0, err
	}
	user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: INFO cpu: %q %q", s.addr(), f["used_cpu_user"], f["used_cpu_sys"])
	}
	return time.Duration((user + sys) * float64(time.Second)), nil
}

// memOf is what s holds for its data: used_memory less what a primary
// keeps for its replica (the replication backlog and the replica's
// output buffer, which fill with the write traffic and are the same
// whatever the data's size), and used_memory itself.
func memOf(ctx context.Context, s *server) (data, used int64, err error) {
	f, err := infoFields(ctx, s, "memory")
	if err != nil {
		return 0, 0, err
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(f[k], 10, 64) // absent: 0
		return n
	}
	used = num("used_memory")
	return used - num("mem_replication_backlog") - num("mem_clients_slaves"), used, nil
}
