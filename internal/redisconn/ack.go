package redisconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// AckKey is the marker a replica-acknowledged write increments before it
// waits (Acker); on a cluster each primary has its own, AckKey:{tag} with
// a tag whose slot that primary serves. Its value means nothing.
const AckKey = "nl:ack"

// ErrNotAcked is Ack's error when fewer replicas than asked for had the
// writes within the timeout.
var ErrNotAcked = errors.New("redis: too few replicas acknowledged the writes in time")

// ackSlack is how much longer than the WAIT's own timeout Ack waits for
// Redis to answer: the WAIT answers by its timeout, so only a Redis that
// does not answer at all runs into it.
const ackSlack = time.Second

// Acker makes the writes a caller has made so far durable on replicas
// before it answers for them. Redis replicates asynchronously: a write a
// client was told of can be lost when its primary dies before a replica
// got it. WAIT n covers only the writes of the connection it runs on,
// and the service's writes go through pools (go-redis's, asynq's), so
// Ack writes a marker and waits for it on one connection, pipelined:
// a primary replicates in order, so once n replicas have the marker they
// have every write the primary took before it, on whatever connection.
//
// On a cluster it does so on every primary (ForEachMaster), not only on
// those a request wrote to: which they are is not known here (the store,
// asynq and the sessions each write where their keys hash), the waits run
// side by side, and a replica lagging on one shard is worth knowing about
// whichever shard it is.
type Acker struct {
	rdb      redis.UniversalClient
	replicas int
	timeout  time.Duration
	// markers are a cluster's marker keys by primary address, read from
	// the layout once and again after a layout change (nil: to read).
	markers atomic.Pointer[map[string]string]
}

// NewAcker waits for replicas replicas (0: never waits) up to timeout
// (NEWSLETTER_REDIS_ACK_REPLICAS, NEWSLETTER_REDIS_ACK_TIMEOUT).
func NewAcker(rdb redis.UniversalClient, replicas int, timeout time.Duration) *Acker {
	return &Acker{rdb: rdb, replicas: replicas, timeout: timeout}
}

// Replicas is how many replicas Ack waits for (0: it does not wait).
func (a *Acker) Replicas() int { return a.replicas }

// Ack returns once the writes made before it (by anyone, on any
// connection) are on the replicas asked for, or ErrNotAcked when fewer
// had them within the timeout; another error is Redis's. A nil Acker, or
// one for 0 replicas, returns nil at once.
func (a *Acker) Ack(ctx context.Context) error {
	if a == nil || a.replicas == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout+ackSlack)
	defer cancel()
	if cc, ok := a.rdb.(*redis.ClusterClient); ok {
		return a.ackCluster(ctx, cc)
	}
	return a.ackOn(ctx, a.rdb, AckKey)
}

// ackOn increments key and waits on one connection of c: a pipeline of
// a plain client is sent on one connection. A pipeline go-redis sends
// again after a network error increments the marker twice, which is
// harmless. go-redis reads a pipeline's answers within the client's
// read timeout (3 s unless set), not the WAIT's own: MaxAckTimeout
// (internal/config) stays below it.
func (a *Acker) ackOn(ctx context.Context, c redis.Cmdable, key string) error {
	pipe := c.Pipeline()
	pipe.Incr(ctx, key)
	wait := pipe.Do(ctx, "wait", a.replicas, a.timeout.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	n, err := wait.Int64()
	if err != nil {
		return err
	}
	if n < int64(a.replicas) {
		return fmt.Errorf("%w: %d of %d within %s", ErrNotAcked, n, a.replicas, a.timeout)
	}
	return nil
}

// ackCluster acks on every primary with its own marker. A primary the
// markers do not know of, or one that refuses its marker (MOVED after a
// failover or a resharding), fails this ack and has the markers read
// again for the next.
func (a *Acker) ackCluster(ctx context.Context, cc *redis.ClusterClient) error {
	markers := a.markers.Load()
	if markers == nil {
		m, err := clusterMarkers(ctx, cc)
		if err != nil {
			return err
		}
		markers = &m
		a.markers.Store(markers)
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		key, ok := (*markers)[addr]
		if !ok {
			a.markers.Store(nil)
			return fmt.Errorf("redis: primary %s is not in the cluster layout read for the acks; read again for the next", addr)
		}
		err := a.ackOn(ctx, node, key)
		if err != nil && !errors.Is(err, ErrNotAcked) {
			a.markers.Store(nil)
		}
		return err
	})
}

// clusterMarkers picks, for each primary in the layout, a marker key in
// a slot it serves: AckKey:{0}, AckKey:{1}, … until every primary has
// one (a few tries each: the slots of small numbers spread over the
// whole range).
func clusterMarkers(ctx context.Context, cc *redis.ClusterClient) (map[string]string, error) {
	layout, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	owner := make([]string, Slots)
	primaries := map[string]bool{}
	for _, r := range layout {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= Slots {
			continue
		}
		primaries[r.Nodes[0].Addr] = true
		for s := r.Start; s <= r.End; s++ {
			owner[s] = r.Nodes[0].Addr
		}
	}
	markers := make(map[string]string, len(primaries))
	for i := 0; len(markers) < len(primaries) && i < 100*Slots; i++ {
		key := AckKey + ":{" + strconv.Itoa(i) + "}"
		if o := owner[KeySlot(key)]; o != "" && markers[o] == "" {
			markers[o] = key
		}
	}
	if len(markers) < len(primaries) {
		return nil, errors.New("redis: no marker key found for every primary of the cluster")
	}
	return markers, nil
}

// ConnectedReplicas is the fewest replicas connected to a primary (INFO
// replication's connected_slaves): the primary's, or on a cluster the
// least of every primary's. It is the default of how many to wait for: a
// primary without replicas has none to wait for.
func ConnectedReplicas(ctx context.Context, rdb redis.UniversalClient) (int, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return replicasOf(ctx, rdb)
	}
	var (
		mu    sync.Mutex
		least = -1
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := replicasOf(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if least < 0 || n < least {
			least = n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return max(least, 0), nil
}

// replicasOf reads connected_slaves from one server's INFO replication.
func replicasOf(ctx context.Context, c redis.Cmdable) (int, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "connected_slaves:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redis: INFO replication has no connected_slaves")
}
