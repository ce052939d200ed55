package inbox

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// TestInboxOnACluster: on a Redis Cluster every script of a person's
// inbox touches one slot (its {tag}), and a change reaches an open
// stream through sharded pub/sub (SPUBLISH, SSUBSCRIBE), whatever shard
// the person's bucket is on.
func TestInboxOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis Cluster of six servers: not in -short (make test-stress), as the other cluster tests")
	}
	cl := rediscluster.Start(t)
	rdb := cl.Client(t)
	people := book{}
	for i := range int64(20) {
		p := channels.Person{ID: 100 + i, Email: fmt.Sprintf("p%d@example.org", i)}
		people[p.Email] = p
	}
	c := NewWith(Config{Secret: []byte(testSecret)}, channels.Env{Redis: rdb, People: people})
	// Only a notice wakes a stream here: no heartbeat reads its log.
	c.heartbeat = time.Hour
	srv := newTestServer(t, c)
	// The process's subscriptions confirmed by every shard first (a
	// stream waits for them only its call's 5 s, which a loaded machine
	// can outlast; a notice before them is read at the next heartbeat).
	people["first@example.org"] = channels.Person{ID: 99, Email: "first@example.org"}
	first, stopFirst := openStream(t, srv, people["first@example.org"], "")
	next(t, first, "count")
	ctx, cancel := context.WithTimeout(context.Background(), poll.BusyMachine)
	c.hub.ready(ctx)
	cancel()
	stopFirst()
	// Twenty people: their buckets spread over the shards.
	for _, p := range people {
		if p.ID == 99 {
			continue
		}
		events, stop := openStream(t, srv, p, "")
		next(t, events, "count")
		if o := deliver(t, c, p, "ev:ev_c", "On a cluster", "*hi*"); o.Verdict != channels.Sent {
			t.Fatalf("deliver to %d: %v %v", p.ID, o.Verdict, o.Err)
		}
		next(t, events, "message")
		if ev := next(t, events, "count"); ev.data != `{"unread":1}` {
			t.Errorf("count after the message: %s", ev.data)
		}
		if w := call(t, c.Handler(), "POST", "/messages/ev_c/read", p, ""); w.Code != http.StatusOK {
			t.Fatalf("read: %d %s", w.Code, w.Body)
		}
		if ev := next(t, events, "count"); ev.data != `{"unread":0}` {
			t.Errorf("count after the read: %s", ev.data)
		}
		stop()
	}
	if err := c.Erase(context.Background(), people["p0@example.org"]); err != nil {
		t.Fatal(err)
	}
}
