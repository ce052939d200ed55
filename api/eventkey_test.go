package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// eventAnswer is one answer of POST /api/events.
type eventAnswer struct {
	code int
	body map[string]string
	hdr  http.Header
}

// postEvent posts an event with bearer and the Idempotency-Key values
// keys (none: no header; one "": an empty one).
func (e *env) postEvent(t *testing.T, bearer, body string, keys ...string) eventAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/events", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if keys != nil {
		req.Header[idempotencyKeyHeader] = keys
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
	}
	return eventAnswer{resp.StatusCode, m, resp.Header}
}

// fanouts are the event ids of the queued fan-out tasks.
func (e *env) fanouts(t *testing.T) []string {
	t.Helper()
	pending, err := e.insp.ListPendingTasks(tasks.QueueDefault)
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range pending {
		var p tasks.FanoutPayload
		if task.Type != tasks.TypeFanout || json.Unmarshal(task.Payload, &p) != nil {
			t.Fatalf("not a fan-out: %s %s", task.Type, task.Payload)
		}
		ids = append(ids, p.ID)
	}
	return ids
}

const topicEvent = `{"topic":"updates","title":"Launch","url":"https://example.com/l"}`

// TestEventIdempotencyKey: the same key again answers the first event
// (status and body, marked replayed) and queues nothing; the same fields
// in another order are the same request, another body is 422; another
// client's same key is its own; the key is kept 24 hours.
func TestEventIdempotencyKey(t *testing.T) {
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) { d.Tokens = d.Store.(*store.Redis) })
	first := e.postEvent(t, "s3cret", topicEvent, "retry-1")
	if first.code != http.StatusAccepted || first.body["status"] != "queued" || !strings.HasPrefix(first.body["id"], "ev_") {
		t.Fatalf("first: %d %v", first.code, first.body)
	}
	again := e.postEvent(t, "s3cret", `{"url":"https://example.com/l", "title":"Launch","topic":"updates"}`, "retry-1")
	if again.code != first.code || fmt.Sprint(again.body) != fmt.Sprint(first.body) || again.hdr.Get(idempotencyReplayedHeader) != "true" {
		t.Fatalf("again: %d %v %v, want %d %v replayed", again.code, again.body, again.hdr, first.code, first.body)
	}
	if first.hdr.Get(idempotencyReplayedHeader) != "" {
		t.Error("the first answer is marked replayed")
	}
	if ids := e.fanouts(t); len(ids) != 1 || ids[0] != first.body["id"] {
		t.Fatalf("queued %v, want the one event %s", ids, first.body["id"])
	}
	other := e.postEvent(t, "s3cret", `{"topic":"updates","title":"Launch 2","url":"https://example.com/l"}`, "retry-1")
	if other.code != http.StatusUnprocessableEntity || !strings.Contains(other.body["error"], "another request") {
		t.Fatalf("the key with another body: %d %v, want 422", other.code, other.body)
	}
	// Another client (a stored token) with the same key: its own event,
	// never the first client's id.
	if _, err := e.store.(*store.Redis).CreateToken(t.Context(), adminauth.HashToken("tok-b"), adminauth.StoredToken{Name: "product-b", Role: adminauth.Editor}); err != nil {
		t.Fatal(err)
	}
	b := e.postEvent(t, "tok-b", topicEvent, "retry-1")
	if b.code != http.StatusAccepted || b.body["id"] == first.body["id"] || b.hdr.Get(idempotencyReplayedHeader) != "" {
		t.Fatalf("another client's same key: %d %v, want an event of its own", b.code, b.body)
	}
	if ids := e.fanouts(t); len(ids) != 2 {
		t.Fatalf("queued %v, want two events", ids)
	}
	// No key: every request is an event.
	e.postEvent(t, "s3cret", topicEvent)
	e.postEvent(t, "s3cret", topicEvent)
	if ids := e.fanouts(t); len(ids) != 4 {
		t.Fatalf("queued %v, want four events", ids)
	}
	// "Not subscribed" is an answer too: given again, nothing queued.
	nobody := `{"email":"nobody@example.com","title":"x","url":"https://example.com"}`
	n1, n2 := e.postEvent(t, "s3cret", nobody, "n"), e.postEvent(t, "s3cret", nobody, "n")
	if n1.code != http.StatusAccepted || n1.body["status"] != "not subscribed" || fmt.Sprint(n2.body) != fmt.Sprint(n1.body) {
		t.Fatalf("not subscribed twice: %v then %v", n1.body, n2.body)
	}
	// One key a client and key, kept 24 hours (store/eventkeys_test.go
	// shows it gone after them).
	keys, err := e.rdb.Keys(t.Context(), "nl:idem:ev:*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %v %v, want 3", keys, err)
	}
	for _, k := range keys {
		if ttl := e.rdb.PTTL(t.Context(), k).Val(); ttl <= store.EventKeyTTL-time.Minute || ttl > store.EventKeyTTL {
			t.Errorf("%s kept %s, want %s", k, ttl, store.EventKeyTTL)
		}
	}
}

// TestEventIdempotencyKeyBounds: a key is 1 to 255 printable ASCII
// characters, given once; another is a 400 that says so, with nothing
// queued or kept. A 400 for the body does not take the key either.
func TestEventIdempotencyKeyBounds(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	for name, keys := range map[string][]string{
		"empty":     {""},
		"256 bytes": {strings.Repeat("k", 256)},
		"a tab":     {"a\tb"},
		"not ASCII": {"clé"},
		"twice":     {"a", "b"},
	} {
		a := e.postEvent(t, "s3cret", topicEvent, keys...)
		if a.code != http.StatusBadRequest || !strings.Contains(a.body["error"], idempotencyKeyHeader) {
			t.Errorf("%s: %d %v, want 400 naming the header", name, a.code, a.body)
		}
	}
	if bad := e.postEvent(t, "s3cret", `{"topic":"updates","title":"Launch","url":"javascript:x"}`, "k1"); bad.code != http.StatusBadRequest {
		t.Fatalf("a bad url with a key: %d %v", bad.code, bad.body)
	}
	if ids := e.fanouts(t); len(ids) != 0 {
		t.Fatalf("refused events were queued: %v", ids)
	}
	if n, err := e.rdb.Keys(t.Context(), "nl:idem:ev:*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("refused requests kept keys: %v %v", n, err)
	}
	// The key a 400 came with, now with a good body: a new event.
	if a := e.postEvent(t, "s3cret", topicEvent, "k1"); a.code != http.StatusAccepted || a.hdr.Get(idempotencyReplayedHeader) != "" {
		t.Fatalf("the key after a 400: %d %v", a.code, a.body)
	}
	if a := e.postEvent(t, "s3cret", topicEvent, strings.Repeat("~", 255)); a.code != http.StatusAccepted {
		t.Fatalf("a key of 255 characters: %d %v", a.code, a.body)
	}
	if ids := e.fanouts(t); len(ids) != 2 {
		t.Fatalf("queued %v, want two events", ids)
	}
}

// TestEventIdempotencyKeyAfterFailure: a first attempt whose queueing
// failed (503) leaves the key free: the retry queues the event, under the
// id the failed one would have had (it may have been queued after all).
func TestEventIdempotencyKeyAfterFailure(t *testing.T) {
	var failing *countingQueue
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		failing = &countingQueue{Enqueuer: d.Queue, failNext: 1}
		d.Queue = failing
	})
	if a := e.postEvent(t, "s3cret", topicEvent, "k"); a.code != http.StatusServiceUnavailable {
		t.Fatalf("the failed attempt: %d %v", a.code, a.body)
	}
	if ids := e.fanouts(t); len(ids) != 0 {
		t.Fatalf("a failed enqueue queued %v", ids)
	}
	a := e.postEvent(t, "s3cret", topicEvent, "k")
	if a.code != http.StatusAccepted || a.body["status"] != "queued" || a.hdr.Get(idempotencyReplayedHeader) != "" {
		t.Fatalf("the retry: %d %v, want 202 queued", a.code, a.body)
	}
	if ids := e.fanouts(t); len(ids) != 1 || ids[0] != a.body["id"] {
		t.Fatalf("queued %v, want the one event %s", ids, a.body["id"])
	}
	if again := e.postEvent(t, "s3cret", topicEvent, "k"); again.code != http.StatusAccepted || again.body["id"] != a.body["id"] {
		t.Fatalf("the key after the retry: %d %v", again.code, again.body)
	}
}

// gateQueue holds the first enqueue until release is closed.
type gateQueue struct {
	tasks.Enqueuer
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (q *gateQueue) EnqueueContext(ctx context.Context, t *asynq.Task, o ...asynq.Option) (*asynq.TaskInfo, error) {
	first := false
	q.once.Do(func() { first = true })
	if first {
		close(q.entered)
		<-q.release
	}
	return q.Enqueuer.EnqueueContext(ctx, t, o...)
}

// TestEventIdempotencyKeyInProgress: while a request with a key is being
// queued, another with the key is a 409 with Retry-After; once the first
// answered, the key answers its event. The store's clock stands still, so
// the holder's lease cannot run out however slow the machine.
func TestEventIdempotencyKeyInProgress(t *testing.T) {
	gate := &gateQueue{entered: make(chan struct{}), release: make(chan struct{})}
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		gate.Enqueuer = d.Queue
		d.Queue = gate
		d.Store = d.Store.(*store.Redis).WithClock(func() time.Time { return at })
	})
	done := make(chan eventAnswer)
	go func() {
		// t.Fatal is for the test's goroutine: a failed request is a zero answer.
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/events", strings.NewReader(topicEvent))
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set(idempotencyKeyHeader, "k")
		var a eventAnswer
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&a.body)
			_ = resp.Body.Close()
			a.code = resp.StatusCode
		}
		done <- a
	}()
	<-gate.entered
	busy := e.postEvent(t, "s3cret", topicEvent, "k")
	close(gate.release)
	first := <-done
	if busy.code != http.StatusConflict || busy.hdr.Get("Retry-After") == "" || !strings.Contains(busy.body["error"], "in progress") {
		t.Errorf("the key while in progress: %d %v %v, want 409 with Retry-After", busy.code, busy.body, busy.hdr)
	}
	if first.code != http.StatusAccepted {
		t.Fatalf("the first: %d %v", first.code, first.body)
	}
	if after := e.postEvent(t, "s3cret", topicEvent, "k"); after.code != http.StatusAccepted || after.body["id"] != first.body["id"] {
		t.Fatalf("the key after: %d %v, want %v", after.code, after.body, first.body)
	}
	if ids := e.fanouts(t); len(ids) != 1 {
		t.Fatalf("queued %v, want one event", ids)
	}
}

// TestEventIdempotencyKeyConcurrent: many requests with one key at once
// make exactly one event; every 202 names it, every other answer is 409.
func TestEventIdempotencyKeyConcurrent(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	const n = 8
	answers := make([]eventAnswer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/events", strings.NewReader(topicEvent))
			req.Header.Set("Authorization", "Bearer s3cret")
			req.Header.Set(idempotencyKeyHeader, "same")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = json.NewDecoder(resp.Body).Decode(&answers[i].body)
				_ = resp.Body.Close()
				answers[i].code = resp.StatusCode
			}
		})
	}
	wg.Wait()
	ids := e.fanouts(t)
	if len(ids) != 1 {
		t.Fatalf("%d requests with one key queued %v, want one event", n, ids)
	}
	accepted := 0
	for _, a := range answers {
		switch {
		case a.code == http.StatusAccepted && a.body["id"] == ids[0]:
			accepted++
		case a.code == http.StatusConflict:
		default:
			t.Errorf("answer %d %v, want 202 with %s or 409", a.code, a.body, ids[0])
		}
	}
	if accepted == 0 {
		t.Error("no request was answered the event")
	}
}

// TestEventIdempotencyKeyKeepsNoAddress: a person's event under a key
// leaves no address in the key's record (an erasure could not find it
// there: the probe found one left a day after the person was erased),
// and the replay still answers the address its fields gave.
func TestEventIdempotencyKeyKeepsNoAddress(t *testing.T) {
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, nil)
	body := `{"email":"Reader.One@Example.com","title":"x","url":"https://example.com"}`
	first := e.postEvent(t, "s3cret", body, "person-1")
	again := e.postEvent(t, "s3cret", body, "person-1")
	if first.code != http.StatusAccepted || first.body["email"] == "" || fmt.Sprint(again.body) != fmt.Sprint(first.body) ||
		again.hdr.Get(idempotencyReplayedHeader) != "true" {
		t.Fatalf("first %d %v, again %d %v %v: want the same answer, replayed", first.code, first.body, again.code, again.body, again.hdr)
	}
	keys, err := e.rdb.Keys(t.Context(), "nl:idem:ev:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v, want 1", keys, err)
	}
	rec, err := e.rdb.HGetAll(t.Context(), keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for field, v := range rec {
		if strings.Contains(strings.ToLower(v), "reader.one") || strings.Contains(v, "@") {
			t.Errorf("the key's record keeps the address in %s: %q", field, v)
		}
	}
}
