package tasks

// The webhook event vocabulary: what happened, as the endpoints that asked
// for its type get it. It lives with the tasks that carry it; the
// webhook channel (channels/webhook) only signs and posts the bytes.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The event types an endpoint can ask for.
const (
	WebhookIssueSent              = "issue.sent"
	WebhookSubscriberConfirmed    = "subscriber.confirmed"
	WebhookSubscriberUnsubscribed = "subscriber.unsubscribed"
	WebhookSubscriberBounced      = "subscriber.bounced"
	WebhookSubscriberComplained   = "subscriber.complained"
)

// WebhookTypes are every event type, in the order the reference lists
// them.
var WebhookTypes = []string{WebhookIssueSent, WebhookSubscriberConfirmed, WebhookSubscriberUnsubscribed, WebhookSubscriberBounced, WebhookSubscriberComplained}

// KnownWebhookType tells whether typ is an event type.
func KnownWebhookType(typ string) bool { return slices.Contains(WebhookTypes, typ) }

// WebhookEvent is one thing that happened, as every endpoint that asked
// for its type gets it.
type WebhookEvent struct {
	// ID is the webhook-id: derived from what happened, so the same
	// change reported twice is one event (msg_ and 24 base32 characters;
	// never a full stop, which the signed content uses as separator).
	ID        string
	Type      string
	Timestamp time.Time // when it happened (not when it is delivered)
	Data      any
}

// WebhookSubscriberData is the data of the subscriber events. It carries
// what a CRM needs to find the person, and nothing else: the subscriber's id and
// address (the address is what other systems key on; the id lets them
// tell a re-subscribed address from the old subscription). Name, time
// zone, topics and the reason a mail bounced stay here.
type WebhookSubscriberData struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	// Source is where a bounce or complaint came from (smtp, ses,
	// sendgrid, mailgun, postmark, api).
	Source string `json:"source,omitempty"`
}

// SubscriberWebhookEvent is the event typ (one of the subscriber.* types)
// about the subscriber sub, which happened at at: its id names the event,
// so the same change reported twice is one event to the endpoints
// (services/webhooks.SubscriberEvent reads at from the store's record).
func SubscriberWebhookEvent(typ string, sub WebhookSubscriberData, at time.Time) WebhookEvent {
	at = at.UTC()
	return WebhookEvent{
		ID:   webhookEventID(typ, strconv.FormatInt(sub.ID, 10), strconv.FormatInt(at.UnixMilli(), 10)),
		Type: typ, Timestamp: at, Data: sub,
	}
}

// WebhookIssue is the data of issue.sent: which issue went out to whom.
type WebhookIssue struct {
	ID      int64    `json:"id"`
	Slug    string   `json:"slug"`
	Subject string   `json:"subject"`
	Topics  []string `json:"topics"`
}

// IssueSentWebhookEvent is issue.sent: the issue's sending finished at at.
func IssueSentWebhookEvent(is WebhookIssue, at time.Time) WebhookEvent {
	if is.Topics == nil {
		is.Topics = []string{}
	}
	return WebhookEvent{
		ID:   webhookEventID(WebhookIssueSent, strconv.FormatInt(is.ID, 10)),
		Type: WebhookIssueSent, Timestamp: at.UTC(), Data: is,
	}
}

// WebhookTestType is the type of the sample event an admin sends to check
// an endpoint (POST /api/webhooks/{id}/test): no endpoint asks for it,
// each is sent to one endpoint on request.
const WebhookTestType = "webhook.test"

// WebhookTestData is the data of a test event.
type WebhookTestData struct {
	Endpoint string `json:"endpoint"`
	Test     bool   `json:"test"`
}

// WebhookTestEvent is a sample event for endpoint, asked for at at; each
// has an id of its own.
func WebhookTestEvent(endpoint string, at time.Time) WebhookEvent {
	at = at.UTC()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	return WebhookEvent{
		ID:   webhookEventID(WebhookTestType, endpoint, strconv.FormatInt(at.UnixNano(), 10), string(nonce[:])),
		Type: WebhookTestType, Timestamp: at, Data: WebhookTestData{Endpoint: endpoint, Test: true},
	}
}

var webhookIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// webhookEventID names an event by what happened: its type and the parts
// that tell it from any other of that type.
func webhookEventID(typ string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(typ))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	return "msg_" + webhookIDEncoding.EncodeToString(sum[:15])
}

// Body is the event as it is sent and signed: minified JSON
// {"type","timestamp","data"}, the shape the specification recommends.
func (e WebhookEvent) Body() ([]byte, error) {
	b, err := json.Marshal(struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}{e.Type, e.Timestamp.UTC(), e.Data})
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	return b, nil
}
