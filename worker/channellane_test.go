package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// chatKind is the task kind of "chat", a channel added through the seam
// for these tests as the binary adds one: by its name alone
// (tasks.AddChannel), before anything reads the lanes.
var chatKind = func() tasks.Kind[tasks.DeliverPayload] {
	k, err := tasks.AddChannel(tasks.ChannelInfo{Name: "chat", Label: "Chat", DefaultOn: false})
	if err != nil {
		panic(err)
	}
	return k
}()

// chat is a fake channel: each person has the addresses the test gives
// them, every message is recorded, and the answer to an address is the
// test's (Sent unless set). It batches up to two messages a Send.
type chat struct {
	mu      sync.Mutex
	book    map[int64][]string
	answer  map[string]channels.Outcome
	sent    []channels.Message
	sends   int
	retired []string
	erased  []int64
}

// Erase records whom a bulk erasure asked it to forget.
func (c *chat) Erase(_ context.Context, p channels.Person) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erased = append(c.erased, p.ID)
	return nil
}

func (c *chat) erasedIDs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.erased)
}

func newChat() *chat {
	return &chat{book: map[int64][]string{}, answer: map[string]channels.Outcome{}}
}

func (c *chat) Spec() channels.Spec { return channels.Spec{Name: "chat", MaxBatch: 2, MaxBody: 512} }

func (c *chat) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sends++
	out := make([]channels.Outcome, len(batch))
	for i, m := range batch {
		if o, ok := c.answer[m.To]; ok {
			out[i] = o
			continue
		}
		c.sent = append(c.sent, m)
	}
	return out
}

func (c *chat) Addresses(_ context.Context, p channels.Person) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.book[p.ID]), nil
}

func (c *chat) Retire(_ context.Context, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retired = append(c.retired, to)
	for id, addrs := range c.book {
		c.book[id] = slices.DeleteFunc(addrs, func(a string) bool { return a == to })
	}
	return nil
}

func (c *chat) set(id int64, addrs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.book[id] = addrs
}

func (c *chat) answerFor(to string, o channels.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answer[to] = o
}

func (c *chat) clearAnswer(to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.answer, to)
}

// got are the addresses the messages went to, in order.
func (c *chat) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var to []string
	for _, m := range c.sent {
		to = append(to, m.To)
	}
	return to
}

// chatEnv is the generic lane's handler over a store and the fake chat.
type chatEnv struct {
	d    *delivery
	chat *chat
	h    *ChannelLane
	now  time.Time
}

func newChatEnv(t *testing.T) *chatEnv {
	t.Helper()
	e := &chatEnv{d: newDelivery(t), chat: newChat(), now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	h := NewHandlers(Deps{Store: e.d.store, Channels: []channels.Channel{e.chat}, Metrics: e.d.metrics, Log: discard,
		ChannelRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Now: func() time.Time { return e.now }})
	e.h = h.Channels["chat"]
	if e.h == nil {
		t.Fatal("no generic lane for the added channel")
	}
	return e
}

func (e *chatEnv) reader(t *testing.T, email string) int64 {
	t.Helper()
	sub, err := e.d.store.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Activate: true, Topics: []string{topics.Updates}})
	if err != nil {
		t.Fatal(err)
	}
	return sub.ID
}

func (e *chatEnv) run(id int64, key string) error {
	task := tasks.NewDeliver(tasks.DeliverPayload{Channel: "chat", Key: key, SubscriberID: id, Topics: []string{topics.Updates}, Title: "Shipped", URL: "https://example.com/o/1"})
	return runTask(context.Background(), chatKind, e.h.Handle, task)
}

func (e *chatEnv) count(result string) float64 {
	return testutil.ToFloat64(e.d.metrics.Notifications.WithLabelValues("chat", result))
}

// TestChannelLaneOncePerAddress: an added channel's message reaches each
// of the person's addresses once, in batches of the channel's MaxBatch,
// however often its task runs; the body is the event as JSON; a reader
// who left and a task of another channel's kind get nothing.
func TestChannelLaneOncePerAddress(t *testing.T) {
	e := newChatEnv(t)
	a := e.reader(t, "a@x.io")
	left := e.reader(t, "b@x.io")
	e.chat.set(a, "a1", "a2", "a3")
	e.chat.set(left, "b1")
	if _, err := e.d.store.Unsubscribe(context.Background(), "b@x.io"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, id := range []int64{a, left} {
			if err := e.run(id, "ev:1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := e.chat.got(); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("sent to %v, want a1, a2, a3 once each", got)
	}
	if e.chat.sends != 2 {
		t.Fatalf("%d Sends for three addresses at two a batch, want 2", e.chat.sends)
	}
	var ev struct {
		Person int64  `json:"person"`
		Title  string `json:"title"`
		URL    string `json:"url"`
	}
	if err := json.Unmarshal(e.chat.sent[0].Body, &ev); err != nil || ev.Person != a || ev.Title != "Shipped" || ev.URL != "https://example.com/o/1" {
		t.Fatalf("body %s (%v): want the event as JSON", e.chat.sent[0].Body, err)
	}
	if got := e.count("sent"); got != 3 {
		t.Fatalf("sent counted %v, want 3", got)
	}
	bad := tasks.NewDeliver(tasks.DeliverPayload{Channel: "chat", Key: "ev:2", SubscriberID: a, Topics: []string{topics.Updates}})
	if err := runTask(context.Background(), chatKind, e.h.Handle, bad); err == nil || len(e.chat.got()) != 3 {
		t.Fatalf("a task without a title: %v, %d sent", err, len(e.chat.got()))
	}
}

// TestChannelLaneOutcomes: each Verdict does what the seam says. Retry
// fails the task with the provider's wait (and a retry sends the message
// then); Retire forgets the address through the channel and ends the
// task; Drop ends it and keeps the address; Pause holds the lane.
func TestChannelLaneOutcomes(t *testing.T) {
	e := newChatEnv(t)
	id := e.reader(t, "a@x.io")
	e.chat.set(id, "ok", "later", "dead", "refused")
	e.chat.answerFor("later", channels.Outcome{Verdict: channels.Retry, After: 90 * time.Second, Err: errors.New("429")})
	e.chat.answerFor("dead", channels.Outcome{Verdict: channels.Retire, Err: errors.New("unknown user")})
	e.chat.answerFor("refused", channels.Outcome{Verdict: channels.Drop, Err: errors.New("400")})

	err := e.run(id, "ev:1")
	if err == nil {
		t.Fatal("a message to retry ended the task")
	}
	if d := e.h.RetryDelay(1, err, nil); d != 90*time.Second {
		t.Fatalf("retry in %v, want the provider's 90s", d)
	}
	if !slices.Equal(e.chat.retired, []string{"dead"}) {
		t.Fatalf("retired %v, want the dead address", e.chat.retired)
	}
	e.chat.clearAnswer("later")
	if err := e.run(id, "ev:1"); err != nil {
		t.Fatal(err)
	}
	// The retry sends what was not sent and nothing twice; the dropped
	// message is retried too, as its address stays (and it is refused
	// again: dropped, the task ends).
	if got := e.chat.got(); !slices.Equal(got, []string{"ok", "later"}) {
		t.Fatalf("sent to %v, want ok then later", got)
	}
	if e.count("dropped") != 1 || e.count("dead") != 2 || e.count("retry") != 1 {
		t.Fatalf("dropped %v, dead %v, retry %v: want 1, 2, 1", e.count("dropped"), e.count("dead"), e.count("retry"))
	}

	e.chat.answerFor("ok", channels.Outcome{Verdict: channels.Pause, After: time.Minute, Err: errors.New("503")})
	if err := e.run(id, "ev:2"); err == nil {
		t.Fatal("a paused provider's message ended the task")
	}
	e.chat.clearAnswer("ok")
	e.chat.set(id, "ok")
	err = e.run(id, "ev:3")
	var deferred *Deferred
	if !errors.As(err, &deferred) || deferred.In <= 0 || deferred.In > time.Minute {
		t.Fatalf("a task in a paused lane: %v, want it deferred for the pause", err)
	}
	e.now = e.now.Add(time.Minute + time.Second)
	if err := e.run(id, "ev:3"); err != nil {
		t.Fatalf("after the pause: %v", err)
	}
}

// TestChannelLaneMaxBody: a message over the channel's MaxBody is never
// sent (dead), and the task ends.
func TestChannelLaneMaxBody(t *testing.T) {
	e := newChatEnv(t)
	id := e.reader(t, "a@x.io")
	e.chat.set(id, "a1")
	long := tasks.NewDeliver(tasks.DeliverPayload{Channel: "chat", Key: "ev:1", SubscriberID: id, Topics: []string{topics.Updates},
		Title: string(make([]byte, 600))})
	if err := runTask(context.Background(), chatKind, e.h.Handle, long); err != nil {
		t.Fatal(err)
	}
	if len(e.chat.got()) != 0 || e.count("dead") != 1 {
		t.Fatalf("sent %v, dead %v: want nothing sent, one dead", e.chat.got(), e.count("dead"))
	}
}

// TestFanoutToAddedChannel: an event fans out to an added channel as to
// a built-in one, through a real worker: its readers who chose the
// channel for the topic get its message (it is off by default), those
// who did not get none, and an event restricted to other channels
// reaches it not at all.
func TestFanoutToAddedChannel(t *testing.T) {
	d := newDelivery(t)
	c := newChat()
	d.channels = []channels.Channel{c}
	d.store = d.store.WithChannels("chat")
	ctx := context.Background()
	readers := seed(t, d.store, "r", 6)
	var chose []string
	for i, email := range readers {
		sub, err := d.store.Get(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		c.set(sub.ID, "chat-"+strconv.Itoa(i))
		if i%2 == 0 {
			if err := d.store.SetChannels(ctx, sub.ID, topics.Updates, []string{store.ChannelEmail, "chat"}); err != nil {
				t.Fatal(err)
			}
			chose = append(chose, "chat-"+strconv.Itoa(i))
		}
	}
	d.startWorker(t, 100000, 4)
	only := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "Mail only", At: time.Now(), Channels: []string{store.ChannelEmail}}
	p := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "We launched", At: time.Now()}
	for _, f := range []tasks.FanoutPayload{only, p} {
		if _, err := d.client.EnqueueContext(ctx, tasks.NewFanout(f)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, poll.BusyMachine, func() error {
		if got := c.got(); len(got) < len(chose) {
			return fmt.Errorf("%d of %d messages", len(got), len(chose))
		}
		return nil
	})
	got := c.got()
	slices.Sort(got)
	if !slices.Equal(got, chose) {
		t.Fatalf("sent to %v, want those who chose chat: %v", got, chose)
	}
	for _, m := range c.sent {
		if !json.Valid(m.Body) || !slices.Contains([]string{"We launched"}, titleOf(t, m.Body)) {
			t.Fatalf("a message of %s: want the event posted for every channel", m.Body)
		}
	}
}

func titleOf(t *testing.T, body []byte) string {
	t.Helper()
	var ev struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Title
}
