package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// A kind's task carries its payload and the kind's options, which a
// constructor's own options override.
func TestKindNewPlacesTheTask(t *testing.T) {
	task := Push.New(PushPayload{Key: "ev:1", SubscriberID: 7, Title: "t"})
	if task.Type() != TypePush {
		t.Fatalf("type %q", task.Type())
	}
	p, err := Push.Decode(task.Payload())
	if err != nil || p.SubscriberID != 7 || p.Key != "ev:1" {
		t.Fatalf("decode: %+v, %v", p, err)
	}
	held := NewIssueBatch(3, 1, []int64{5, 6}, time.Unix(1700000000, 0), true)
	if held.Type() != TypeIssueEmail {
		t.Fatalf("type %q", held.Type())
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

// The outbox rebuilds a job of any kind with a TaskID, under that id and
// due time, and refuses a type it does not know or a payload its kind
// refuses, changing nothing.
func TestOutboxRoundTripsEveryKindWithAnID(t *testing.T) {
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
	bad := NewConfirm("a@example.com", due).Outbox()
	bad.Body, _ = json.Marshal(outboxBody{Type: TypeConfirmEmail, Payload: json.RawMessage(`{"email":""}`)})
	if _, err := JobFromOutbox(bad); err == nil {
		t.Error("a confirm without an address was rebuilt")
	}
	bad.Body, _ = json.Marshal(outboxBody{Type: "email:nope", Payload: json.RawMessage(`{}`)})
	if _, err := JobFromOutbox(bad); err == nil {
		t.Error("an unknown type was rebuilt")
	}
}
