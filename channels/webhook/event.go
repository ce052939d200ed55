package webhook

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/store"
)

// The event types an endpoint can ask for.
const (
	IssueSent              = "issue.sent"
	SubscriberConfirmed    = "subscriber.confirmed"
	SubscriberUnsubscribed = "subscriber.unsubscribed"
	SubscriberBounced      = "subscriber.bounced"
	SubscriberComplained   = "subscriber.complained"
)

// Types are every event type, in the order the reference lists them.
var Types = []string{IssueSent, SubscriberConfirmed, SubscriberUnsubscribed, SubscriberBounced, SubscriberComplained}

// Known tells whether typ is an event type.
func Known(typ string) bool { return slices.Contains(Types, typ) }

// Event is one thing that happened, as every endpoint that asked for its
// type gets it.
type Event struct {
	// ID is the webhook-id: derived from what happened, so the same
	// change reported twice is one event (msg_ and 24 base32 characters;
	// never a full stop, which the signed content uses as separator).
	ID        string
	Type      string
	Timestamp time.Time // when it happened (not when it is delivered)
	Data      any
}

// SubscriberData is the data of the subscriber events. It carries what a
// CRM needs to find the person, and nothing else: the subscriber's id and
// address (the address is what other systems key on; the id lets them
// tell a re-subscribed address from the old subscription). Name, time
// zone, topics and the reason a mail bounced stay here.
type SubscriberData struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	// Source is where a bounce or complaint came from (smtp, ses,
	// sendgrid, mailgun, postmark, api).
	Source string `json:"source,omitempty"`
}

// Subscriber is the event typ (one of the subscriber.* types) about sub,
// as the store answered the change: it happened at sub's confirmation
// (subscriber.confirmed) or at the end of its subscription (the others).
// source names where a bounce or complaint came from ("" for the others).
func Subscriber(typ string, sub store.Subscriber, source string) Event {
	at := sub.UnsubscribedAt
	if typ == SubscriberConfirmed {
		at = sub.ConfirmedAt
	}
	if at.IsZero() {
		at = time.Now() // a record without the time: the moment we heard of it
	}
	at = at.UTC()
	return Event{
		ID:   eventID(typ, strconv.FormatInt(sub.ID, 10), strconv.FormatInt(at.UnixMilli(), 10)),
		Type: typ, Timestamp: at,
		Data: SubscriberData{ID: sub.ID, Email: sub.Email, Source: source},
	}
}

// Issue is the data of issue.sent: which issue went out to whom.
type Issue struct {
	ID      int64    `json:"id"`
	Slug    string   `json:"slug"`
	Subject string   `json:"subject"`
	Topics  []string `json:"topics"`
}

// IssueSentEvent is issue.sent: the issue's sending finished at at.
func IssueSentEvent(is Issue, at time.Time) Event {
	if is.Topics == nil {
		is.Topics = []string{}
	}
	return Event{
		ID:   eventID(IssueSent, strconv.FormatInt(is.ID, 10)),
		Type: IssueSent, Timestamp: at.UTC(), Data: is,
	}
}

// TestType is the type of the sample event an admin sends to check an
// endpoint (POST /api/webhooks/{id}/test): no endpoint asks for it, each
// is sent to one endpoint on request.
const TestType = "webhook.test"

// TestData is the data of a test event.
type TestData struct {
	Endpoint string `json:"endpoint"`
	Test     bool   `json:"test"`
}

// TestEvent is a sample event for endpoint, asked for at at; each has an
// id of its own.
func TestEvent(endpoint string, at time.Time) Event {
	at = at.UTC()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	return Event{
		ID:   eventID(TestType, endpoint, strconv.FormatInt(at.UnixNano(), 10), string(nonce[:])),
		Type: TestType, Timestamp: at, Data: TestData{Endpoint: endpoint, Test: true},
	}
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// eventID names an event by what happened: its type and the parts that
// tell it from any other of that type.
func eventID(typ string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(typ))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	return "msg_" + idEncoding.EncodeToString(sum[:15])
}

// Body is the event as it is sent and signed: minified JSON
// {"type","timestamp","data"}, the shape the specification recommends.
func (e Event) Body() ([]byte, error) {
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
