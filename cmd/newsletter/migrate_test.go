package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// TestMigrateToCluster: `newsletter migrate --to-cluster` copies one Redis
// into a real cluster, and every person reads the same there as before
// (status, topics, consent, marks, history, push), the list and the
// figures too; a task waiting in a queue goes with it. A second copy into
// the cluster now in use is refused, as is a copy while roles run on the
// source.
func TestMigrateToCluster(t *testing.T) {
	parallel(t) // a redis-server and a cluster of its own
	// A Redis of its own, a real one whatever the tests use: the copy is
	// DUMP and RESTORE, Redis's own serialisation, which miniredis does
	// not speak.
	srv := startRedisServer(t)
	url := srv.url()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + srv.port})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	src := store.NewRedis(rdb)
	if err := src.CheckVersion(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	var emails []string
	for i := range 300 {
		e := fmt.Sprintf("m%03d@example.org", i)
		emails = append(emails, e)
		req := store.SubscribeRequest{Email: e, Activate: i%7 != 0, Source: store.SourceImport}
		if i%3 == 0 {
			req.Topics = []string{"updates"}
		}
		sub, err := src.Subscribe(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 11 {
		case 1:
			_, err = src.Unsubscribe(ctx, e)
		case 2:
			err = src.MarkBounced(ctx, e)
		case 3:
			_, err = src.RecordFeedback(ctx, store.Feedback{ID: "r" + e, Email: e, Type: store.SoftBounce}, store.FeedbackPolicy{})
		case 4:
			err = src.MarkSent(ctx, store.Mark{Kind: "digest", Key: "2026-W48", SubscriberID: sub.ID, Shared: true},
				store.Mark{Kind: "confirm", Key: "n" + e, SubscriberID: sub.ID})
		case 5:
			if sub.Status != store.Active {
				break
			}
			err = src.AddPushSubscription(ctx, sub.ID, store.PushSubscription{Endpoint: "https://push.example/" + e, P256DH: make([]byte, 65), Auth: make([]byte, 16)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	task, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("email:welcome", []byte(`{"subscriber_id":7}`)),
		asynq.Queue("transactional"), asynq.ProcessIn(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	before := people(t, src, emails)

	c := rediscluster.Start(t)
	env := map[string]string{"NEWSLETTER_REDIS_CLUSTER_ADDRS": strings.Join(c.Addrs(), ",")}
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"migrate", "--to-cluster", "--from", url}, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "copied ") {
		t.Fatalf("migrate said: %q", out.String())
	}
	dst := store.NewRedis(c.Client(t))
	after := people(t, dst, emails)
	for _, e := range emails {
		if before[e] != after[e] {
			t.Errorf("%s on the cluster:\n got %s\nwant %s", e, after[e], before[e])
		}
	}
	if b, a := stats(t, src), stats(t, dst); a != b {
		t.Errorf("the figures on the cluster:\n got %s\nwant %s", a, b)
	}
	info, err := asynq.NewInspectorFromRedisClient(c.Client(t)).GetTaskInfo("transactional", task.ID)
	if err != nil || info.State != asynq.TaskStateScheduled {
		t.Errorf("the waiting task on the cluster: %+v %v", info, err)
	}
	// New people get ids in their home shard, past every copied one.
	fresh, err := dst.Subscribe(ctx, store.SubscribeRequest{Email: "new@example.org", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range before {
		if strings.Contains(p, fmt.Sprintf(`"id":%d,`, fresh.ID)) {
			t.Fatalf("a new subscriber on the cluster took a copied id: %d", fresh.ID)
		}
	}

	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"migrate", "--to-cluster", "--from", url}, func(k string) string { return env[k] }, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "already holds a data set") {
		t.Fatalf("a second copy into the cluster in use: exit %d\n%s", code, errb.String())
	}
	if err := rdb.ZAdd(ctx, "asynq:servers", redis.Z{Score: float64(time.Now().Add(time.Minute).Unix()), Member: "host:1:abc"}).Err(); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run(ctx, []string{"migrate", "--to-cluster", "--from", url}, func(k string) string { return env[k] }, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "stop every role") {
		t.Fatalf("a copy while a role runs on the source: exit %d\n%s", code, errb.String())
	}
}

// people is what the store says about each address, as JSON.
func people(t *testing.T, s *store.Redis, emails []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range emails {
		p, err := s.PersonalData(context.Background(), e)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		out[e] = string(b)
	}
	return out
}

func stats(t *testing.T, s *store.Redis) string {
	t.Helper()
	st, err := s.Stats(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLayout3StopsStartUpAndMigrate: a role started on layout-3 data (one
// Redis, the subscribers in one keyspace) stops before it serves, and
// `newsletter migrate` refuses it as its source, each with one line naming
// the release that upgrades it (store.UpgradeFrom); neither changes a key.
func TestLayout3StopsStartUpAndMigrate(t *testing.T) {
	rdb, url := redistest.Own(t, redistest.DBCommand)
	ctx := context.Background()
	// What layout 3 kept of one active subscriber, id 5, with the
	// markers of the back-fills.
	rec := strings.Join([]string{"a", "1", "1", "", "old@example.org", "Old", ""}, "\x1f")
	p := rdb.Pipeline()
	p.Set(ctx, "nl:schema", "3", 0)
	for _, k := range []string{"nl:supp:filled", "nl:tfilled", "nl:st:filled"} {
		p.Set(ctx, k, "1", 0)
	}
	p.Set(ctx, "nl:seq", "5", 0)
	p.HSet(ctx, "nl:s:0", "5", rec)
	p.SetBit(ctx, "nl:act", 5, 1)
	p.SetBit(ctx, "nl:t:digest", 5, 1)
	p.SetBit(ctx, "nl:tknown", 5, 1)
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	before := keysAndValues(t, rdb)
	worker := realEnv(url, "smtp://127.0.0.1:1?tls=none", nil)
	// A cluster never reached: the source is refused before it is used.
	migrate := map[string]string{"NEWSLETTER_REDIS_CLUSTER_ADDRS": "127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"worker"}, worker, "newsletter worker: redis layout: the data is in layout 3, older than this version reads (layout 4)"},
		{[]string{"migrate", "--to-cluster", "--from", url}, migrate, "newsletter migrate: the source, "},
	} {
		var out, errb bytes.Buffer
		code := run(ctx, c.args, func(k string) string { return c.env[k] }, &out, &errb)
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		if code != 1 || !strings.HasPrefix(last, c.want) || !strings.Contains(last, "the data is in layout 3") ||
			!strings.Contains(last, "release of commit "+store.UpgradeFrom+" once") {
			t.Fatalf("%v on layout-3 data: exit %d, stderr:\n%s\nwant exit 1 and a last line starting %q naming %s", c.args, code, errb.String(), c.want, store.UpgradeFrom)
		}
		if after := keysAndValues(t, rdb); after != before {
			t.Fatalf("%v on layout-3 data changed it:\nbefore %s\nafter  %s", c.args, before, after)
		}
	}
}

// keysAndValues is every key of the database with its type and a dump of
// its value, sorted, as one string to compare.
func keysAndValues(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		default:
			t.Fatalf("key %s of type %s", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %q\n", k, typ, fmt.Sprint(v))
	}
	return b.String()
}
