package webhooks_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Event ids come from what happened: the same change is the same event
// (a repeat is recognised by the receiver and by the task id), another
// change another one; no id has a full stop, the signed content's
// separator.
func TestEventIDsAndPayload(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	sub := store.Subscriber{ID: 7, Email: "ann@example.com", Name: "Ann Secret", Timezone: "Europe/Berlin", Topics: []string{"digest"},
		ConfirmedAt: at, UnsubscribedAt: at.Add(time.Hour)}
	confirmed := webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, sub, "")
	if again := webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, sub, ""); again.ID != confirmed.ID {
		t.Fatal("the same confirmation made two event ids")
	}
	ids := map[string]string{confirmed.ID: "confirmed"}
	for name, ev := range map[string]tasks.WebhookEvent{
		"unsubscribed":    webhooks.SubscriberEvent(tasks.WebhookSubscriberUnsubscribed, sub, ""),
		"bounced":         webhooks.SubscriberEvent(tasks.WebhookSubscriberBounced, sub, "ses"),
		"complained":      webhooks.SubscriberEvent(tasks.WebhookSubscriberComplained, sub, "ses"),
		"other person":    webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, store.Subscriber{ID: 8, ConfirmedAt: at}, ""),
		"confirmed later": webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, store.Subscriber{ID: 7, ConfirmedAt: at.Add(time.Millisecond)}, ""),
		"issue":           tasks.IssueSentWebhookEvent(tasks.WebhookIssue{ID: 3, Slug: "lanes", Subject: "Lanes"}, at),
	} {
		if prev, dup := ids[ev.ID]; dup {
			t.Errorf("%s has the id of %s", name, prev)
		}
		ids[ev.ID] = name
	}
	for id := range ids {
		if !strings.HasPrefix(id, "msg_") || strings.ContainsAny(id, ". ") || len(id) != 28 {
			t.Errorf("event id %q: want msg_ and 24 base32 characters", id)
		}
	}

	body, err := webhooks.SubscriberEvent(tasks.WebhookSubscriberBounced, sub, "ses").Body()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(body, &got); err != nil || len(got) != 3 {
		t.Fatalf("body %s: want {type, timestamp, data}", body)
	}
	if string(got["type"]) != `"subscriber.bounced"` || string(got["timestamp"]) != `"2026-03-01T13:00:00.123Z"` {
		t.Fatalf("body %s: type or timestamp (the time it happened)", body)
	}
	// The data is what a CRM needs to find the person: id and address.
	if string(got["data"]) != `{"id":7,"email":"ann@example.com","source":"ses"}` {
		t.Fatalf("data %s: want the id, the address and the source, nothing more", got["data"])
	}
	if strings.Contains(string(body), "Ann Secret") || strings.Contains(string(body), "Berlin") {
		t.Fatalf("personal data beyond the address in %s", body)
	}
	issue, _ := tasks.IssueSentWebhookEvent(tasks.WebhookIssue{ID: 3, Slug: "lanes", Subject: "Lanes"}, at).Body()
	if string(issue) != `{"type":"issue.sent","timestamp":"2026-03-01T12:00:00.123Z","data":{"id":3,"slug":"lanes","subject":"Lanes","topics":[]}}` {
		t.Fatalf("issue.sent body %s", issue)
	}
	for _, typ := range []string{"issue.sent", "subscriber.confirmed", "subscriber.unsubscribed", "subscriber.bounced", "subscriber.complained"} {
		if !tasks.KnownWebhookType(typ) {
			t.Errorf("%s unknown", typ)
		}
	}
	if tasks.KnownWebhookType("subscriber.created") || tasks.KnownWebhookType("") {
		t.Error("an event type we never send is known")
	}
}
