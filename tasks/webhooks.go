package tasks

import (
	"time"

	"github.com/hibiken/asynq"
)

// WebhookPayload is the payload of TypeWebhook: one event for one
// endpoint. The endpoint's URL and secret are read when the task runs (a
// secret has no business in the queue, and an endpoint removed or
// disabled since gets nothing).
type WebhookPayload struct {
	Endpoint string `json:"endpoint"`
	ID       string `json:"id"` // the webhook-id
	Type     string `json:"type"`
	// Queued starts the retry window (WebhookBackoff.Window).
	Queued time.Time `json:"queued"`
	// Body is the signed JSON, kept as a string so every attempt sends
	// the very same bytes.
	Body string `json:"body"`
	// Test marks a sample event an admin asked for: tried once, its
	// outcome only logged (the endpoint's failures are not counted).
	Test bool `json:"test,omitempty"`
}

// NewWebhookTest is the delivery of a test event to endpoint, queued now.
func NewWebhookTest(endpoint string, now time.Time) (*asynq.Task, WebhookPayload, error) {
	ev := WebhookTestEvent(endpoint, now)
	body, err := ev.Body()
	if err != nil {
		return nil, WebhookPayload{}, err
	}
	p := WebhookPayload{Endpoint: endpoint, ID: ev.ID, Type: ev.Type, Queued: now.UTC(), Body: string(body), Test: true}
	return NewWebhook(p), p, nil
}

// WebhookTaskID is the task of event id for endpoint: an event is queued
// once per endpoint, however often it is reported while its task exists.
func WebhookTaskID(endpoint, id string) string { return "webhook:" + endpoint + ":" + id }

// webhookTimeout is the task's budget: the endpoint's timeout (15 s,
// channels/webhook.DefaultTimeout, which worker's tests hold below this
// budget) and the store's round trips around it.
const webhookTimeout = 30 * time.Second

// NewWebhook is the delivery of p (Webhook).
func NewWebhook(p WebhookPayload) *asynq.Task { return Webhook.New(p) }
