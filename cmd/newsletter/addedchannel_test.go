package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The test binary run as a service with NEWSLETTER_TEST_CHAT=1
// (startProcess) adds one channel through the seam, as a channel package
// would with its one line in addedChannels: beside the built-in ones,
// and nothing else in the binary knows it. The package's other services
// run without it (an added lane is one more asynq server polling Redis
// in each of them).
var _ = func() bool {
	if os.Getenv("NEWSLETTER_TEST_CHAT") == "1" {
		addedChannels = append(addedChannels, testChatPlugin)
	}
	return true
}()

// testChatPlugin is "chat": a channel that keeps each person's messages
// in the service's Redis (its own keys, under ch:chat:) and serves them
// back under /channels/chat/, off until a person chooses it.
var testChatPlugin = channels.Plugin{
	Name: "chat", Label: "Chat",
	New: func(env channels.Env) (channels.Channel, error) { return &testChat{env: env}, nil },
}

type testChat struct{ env channels.Env }

func (c *testChat) Spec() channels.Spec {
	return channels.Spec{Name: "chat", MaxBatch: 10, MaxBody: 4096}
}

func chatKey(to string) string { return "ch:chat:{" + to + "}:messages" }

func (c *testChat) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	return channels.OneByOne(ctx, batch, func(ctx context.Context, m channels.Message) channels.Outcome {
		if err := c.env.Redis.RPush(ctx, chatKey(m.To), m.Body).Err(); err != nil {
			return channels.Outcome{Verdict: channels.Retry, Err: err}
		}
		return channels.Outcome{Verdict: channels.Sent}
	})
}

func (c *testChat) Export(ctx context.Context, p channels.Person) (any, error) {
	return c.env.Redis.LRange(ctx, chatKey(strconv.FormatInt(p.ID, 10)), 0, -1).Result()
}

func (c *testChat) Erase(ctx context.Context, p channels.Person) error {
	return c.env.Redis.Del(ctx, chatKey(strconv.FormatInt(p.ID, 10))).Err()
}

// Handler serves GET /channels/chat/{person}: the person's messages.
func (c *testChat) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{person}", func(w http.ResponseWriter, r *http.Request) {
		got, err := c.env.Redis.LRange(r.Context(), chatKey(r.PathValue("person")), 0, -1).Result()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(got)
	})
	return mux
}

// TestAddedChannelEndToEnd: a channel added with one line reaches its
// readers through the binary: the events API names it (and an unknown
// one is refused with the list), the fan-out queues its task in its own
// lane for the reader who chose it and not the one who did not, its
// routes are served under /channels/chat/, and the person's export holds
// what it keeps, which their erasure forgets.
func TestAddedChannelEndToEnd(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_WELCOME_DELAY": "1h",
		"NEWSLETTER_TEST_CHAT": "1",
	})
	svc := startServiceProcess(t, "serve", env)
	ctx := context.Background()
	st := store.NewRedis(rdb).WithChannels("chat")
	ids := map[string]int64{}
	for _, email := range []string{"chooses@example.com", "does.not@example.com"} {
		svc.post(t, "/subscribe", `{"email":"`+email+`","topics":["updates"]}`, "", http.StatusAccepted)
		var sub store.Subscriber
		poll.Until(t, poll.BusyMachine, func() (err error) { sub, err = st.Get(ctx, email); return err })
		ids[email] = sub.ID
	}
	if err := st.SetChannels(ctx, ids["chooses@example.com"], topics.Updates, []string{store.ChannelEmail, "chat"}); err != nil {
		t.Fatal(err)
	}

	code, body := svc.call(t, "POST", "/api/events", `{"topic":"updates","title":"Fax","url":"https://example.com/f","channels":["fax"]}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "chat") {
		t.Fatalf("an unknown channel: %d %s, want 400 naming chat among the channels", code, body)
	}
	for _, email := range []string{"chooses@example.com", "does.not@example.com"} {
		svc.post(t, "/api/events", `{"email":"`+email+`","title":"Your order shipped","url":"https://example.com/o/1","channels":["chat"]}`, issueAdmin, http.StatusAccepted)
	}
	messages := func(email string) []string {
		var got []string
		svc.callJSON(t, "GET", fmt.Sprintf("/channels/chat/%d", ids[email]), "", http.StatusOK, &got)
		return got
	}
	poll.True(t, poll.BusyMachine, "the chat message", func() bool { return len(messages("chooses@example.com")) == 1 })
	var ev struct {
		Person int64  `json:"person"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal([]byte(messages("chooses@example.com")[0]), &ev); err != nil || ev.Title != "Your order shipped" || ev.Person != ids["chooses@example.com"] {
		t.Fatalf("the message %v (%v)", messages("chooses@example.com"), err)
	}
	// Both events were fanned out (their ingress tasks done) and the chat
	// lane's queue is empty: whatever chat was to get, it has.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.Until(t, poll.BusyMachine, func() error {
		done, err := insp.ListCompletedTasks(tasks.QueueDefault)
		if err != nil {
			return err
		}
		fanouts := 0
		for _, ti := range done {
			if ti.Type == tasks.TypeFanout {
				fanouts++
			}
		}
		q, err := insp.GetQueueInfo("chat")
		if err != nil {
			return err
		}
		if fanouts != 2 || q.Size-q.Completed-q.Archived != 0 {
			return fmt.Errorf("%d fan-outs done, chat queue %+v", fanouts, q)
		}
		return nil
	})
	if got := messages("does.not@example.com"); len(got) != 0 {
		t.Fatalf("a reader who did not choose chat got %v", got)
	}
	var export struct {
		Channels    map[string][]string `json:"channels"`
		ChannelData map[string][]string `json:"channel_data"`
	}
	svc.callJSON(t, "GET", "/api/subscribers/chooses@example.com/export", "", http.StatusOK, &export)
	if len(export.ChannelData["chat"]) != 1 || !slices.Contains(export.Channels[topics.Updates], "chat") {
		t.Fatalf("the export's channel data %v and channels %v: want the chat message, and chat among the choices", export.ChannelData, export.Channels)
	}
	if code, body := svc.call(t, "DELETE", "/api/subscribers/chooses@example.com", ""); code != http.StatusNoContent {
		t.Fatalf("erase: %d %s", code, body)
	}
	if n, err := rdb.Exists(ctx, chatKey(strconv.FormatInt(ids["chooses@example.com"], 10))).Result(); err != nil || n != 0 {
		t.Fatalf("after the erasure chat still keeps the person's messages (%d, %v)", n, err)
	}
}

// TestAddedLaneSizes: an added channel's lane takes its Plugin's pool,
// or the default, and its variables override both; a bad value is an
// error naming the variable.
func TestAddedLaneSizes(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	plugins := []channels.Plugin{testChatPlugin}
	sizes, err := addedLaneSizes(getenv, plugins)
	if err != nil || sizes["chat"] != (laneSize{concurrency: defaultAddedWorkers}) {
		t.Fatalf("defaults: %+v %v", sizes, err)
	}
	env["NEWSLETTER_CHAT_CONCURRENCY"], env["NEWSLETTER_CHAT_RATE"] = "12", "50"
	if sizes, err = addedLaneSizes(getenv, plugins); err != nil || sizes["chat"] != (laneSize{concurrency: 12, rate: 50}) {
		t.Fatalf("from the environment: %+v %v", sizes, err)
	}
	env["NEWSLETTER_CHAT_CONCURRENCY"] = "0"
	if _, err := addedLaneSizes(getenv, plugins); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_CHAT_CONCURRENCY") {
		t.Fatalf("a pool of 0: %v", err)
	}
}
