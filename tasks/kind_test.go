package tasks

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// Every kind has a queue that a lane serves, a known type and, unless it
// is bundled, a place among HandledTypes.
func TestKindsAreComplete(t *testing.T) {
	handled := HandledTypes()
	for _, typ := range kindOrder {
		k := kinds[typ]
		if k.queue == "" || LaneOf(k.queue) == "" {
			t.Errorf("%s: queue %q served by no lane", typ, k.queue)
		}
		in := false
		for _, h := range handled {
			in = in || h == typ
		}
		if in == k.grouped {
			t.Errorf("%s: grouped %v, among HandledTypes %v", typ, k.grouped, in)
		}
	}
	if len(kindOrder) != len(kinds) {
		t.Errorf("%d kinds in order, %d by type", len(kindOrder), len(kinds))
	}
}

// Every constructor places its task as the constructors before the kinds
// did (queue, retries, time budget, retention, TaskID, group), read back
// from Redis as asynq stored it.
func TestConstructorsPlaceTheirTasks(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBTasks)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	due := time.Now().Add(time.Hour).Truncate(time.Second)
	slot := FeedsSlot(due, 15*time.Minute)
	fb, err := NewFeedback(FeedbackPayload{ID: "r1", Email: "a@example.com", Type: "hard", Source: "smtp"})
	if err != nil {
		t.Fatal(err)
	}
	wh := WebhookPayload{Endpoint: "crm", ID: "msg_1", Type: "subscriber.confirmed", Queued: due, Body: "{}"}
	for _, c := range []struct {
		task              *asynq.Task
		queue, id, group  string
		retry             int
		timeout, retained time.Duration
	}{
		{NewConfirm("a@example.com", due).Task, QueueTransactional, "confirm:a@example.com", "", 10, time.Minute, 0},
		{NewWelcomeAt("a@example.com", due).Task, QueueDefault, "welcome:a@example.com", "", 5, 2 * time.Minute, 0},
		{NewStep("a@example.com", "tips", due).Task, QueueDefault, "step:a@example.com:tips", "", 5, 2 * time.Minute, 0},
		{NewUnsubscribeLink("a@example.com"), QueueTransactional, "unsubscribe:a@example.com", "", 10, time.Minute, 0},
		{fb, QueueCritical, "feedback:r1", "", 20, 30 * time.Second, 0},
		{NewDigestPlan("2026-W49"), QueueCritical, "digest:2026-W49", "", 25, 30 * time.Minute, 0},
		{NewIssuePlan(3, 1, due).Task, QueueCritical, "issue:3", "", 25, 30 * time.Minute, 0},
		{NewIssueBatch(3, 2, []int64{5, 6}, due, false), QueueCritical, "issue:3:r2:5", "", 20, 10 * time.Minute, 0},
		{NewIssueBatch(3, 2, []int64{5, 6}, due, true), QueueCritical, fmt.Sprintf("issue:3:r2:5:t%d", due.Unix()), "", 20, 10 * time.Minute, 0},
		{NewFeedsPoll(slot, 15*time.Minute), QueueDefault, FeedsPollTaskID(slot), "", 2, 15 * time.Minute, 15 * time.Minute},
		{NewWebhook(wh), QueueWebhook, "webhook:crm:msg_1", "", DefaultWebhookBackoff.MaxRetry(), webhookTimeout, DefaultWebhookBackoff.Window},
		{NewFanout(FanoutPayload{ID: "ev_1", Topic: "updates", Title: "t", At: due}), QueueDefault, "fanout:ev:ev_1", "", 25, 30 * time.Minute, 24 * time.Hour},
		{NewEventMail(EventMailPayload{ID: "ev_1", Topic: "updates", Title: "t", IDs: []int64{7, 8}}, due, false), QueueDefault, "event:ev_1:7", "", 20, 10 * time.Minute, 0},
		{NewEventMail(EventMailPayload{ID: "ev_1", Topic: "updates", Title: "t", IDs: []int64{7, 8}}, due, true), QueueDefault, fmt.Sprintf("event:ev_1:7:t%d", due.Unix()), "", 20, 10 * time.Minute, 0},
		{NewPersonEvent("ev_2", 9, "t", "", due), QueueDefault, "event:ev_2", "subscriber:9", 0, 0, 0},
		{NewPush(PushPayload{Key: "ev:ev_1", SubscriberID: 9, Title: "t"}), QueuePush, "push:ev:ev_1:9", "", 20, pushTimeout, 0},
		{NewImportRun("j1"), QueueLow, "import:j1", "", 25, 30 * time.Minute, 0},
	} {
		if _, err := client.Enqueue(c.task, asynq.ProcessAt(due)); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		ti, err := insp.GetTaskInfo(c.queue, c.id)
		if err != nil {
			t.Fatalf("%s not in queue %s: %v", c.id, c.queue, err)
		}
		if c.group != "" {
			if ti.Group != c.group {
				t.Errorf("%s: group %q, want %q", c.id, ti.Group, c.group)
			}
			continue // asynq keeps its own budget for a grouped task
		}
		if ti.MaxRetry != c.retry || ti.Timeout != c.timeout || ti.Retention != c.retained {
			t.Errorf("%s: MaxRetry %d Timeout %s Retention %s, want %d %s %s", c.id, ti.MaxRetry, ti.Timeout, ti.Retention, c.retry, c.timeout, c.retained)
		}
	}
}

// A payload that cannot be read, or lacks what its task needs, is refused
// by Decode with the kind's name and the reason.
func TestKindDecodeRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		payload string
		want    string
	}{
		"not json":         {`{`, "decode email:confirm payload"},
		"no nonce":         {`{"email":"a@example.com"}`, "has no email or nonce"},
		"wrong field type": {`{"email":7,"nonce":"n"}`, "decode email:confirm payload"},
	} {
		_, err := ConfirmEmail.Decode([]byte(c.payload))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := ConfirmEmail.Decode([]byte(`{"email":"a@example.com","nonce":"n"}`)); err != nil {
		t.Errorf("good payload: %v", err)
	}
}

// The outbox rebuilds the jobs it carries (the confirmation, the
// sequence's steps, an issue's plan) under their id and due time with
// their payload's very bytes (a field a later version added survives),
// and refuses an unknown type, a type without a TaskID, or a payload its
// kind refuses.
func TestOutboxRoundTripsItsJobs(t *testing.T) {
	due := time.Unix(1800000000, 0)
	for _, j := range []Job{NewConfirm("a@example.com", due), NewWelcomeAt("a@example.com", due), NewIssuePlan(9, 2, due), NewStep("a@example.com", "tips", due)} {
		back, err := JobFromOutbox(j.Outbox())
		if err != nil {
			t.Fatalf("%s: %v", j.ID, err)
		}
		if back.ID != j.ID || !back.Due.Equal(j.Due) || back.Task.Type() != j.Task.Type() || string(back.Task.Payload()) != string(j.Task.Payload()) {
			t.Errorf("%s came back as %s %v %s %s", j.ID, back.ID, back.Due, back.Task.Type(), back.Task.Payload())
		}
	}
	later := NewConfirm("a@example.com", due).Outbox()
	later.Body, _ = json.Marshal(outboxBody{Type: TypeConfirmEmail, Payload: json.RawMessage(`{"email":"a@example.com","nonce":"n","added":"later"}`)})
	if back, err := JobFromOutbox(later); err != nil || !strings.Contains(string(back.Task.Payload()), `"added":"later"`) {
		t.Errorf("a later version's field was lost: %v, %s", err, back.Task.Payload())
	}
	bad := NewConfirm("a@example.com", due).Outbox()
	bad.Body, _ = json.Marshal(outboxBody{Type: TypeConfirmEmail, Payload: json.RawMessage(`{"email":""}`)})
	if _, err := JobFromOutbox(bad); err == nil {
		t.Error("a confirm without an address was rebuilt")
	}
	bad.Body, _ = json.Marshal(outboxBody{Type: TypeEventsEmail, Payload: json.RawMessage(`{"subscriber_id":1,"events":[{}]}`)})
	if _, err := JobFromOutbox(bad); err == nil || !strings.Contains(err.Error(), "no TaskID") {
		t.Errorf("a type without a TaskID: %v", err)
	}
	bad.Body, _ = json.Marshal(outboxBody{Type: "email:nope", Payload: json.RawMessage(`{}`)})
	if _, err := JobFromOutbox(bad); err == nil {
		t.Error("an unknown type was rebuilt")
	}
}
