package tasks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// Fan-out: one event (POST /api/events) or one issue send comes in as ONE
// ingress task, TypeFanout. Its handler reads each person's channels and
// topics and enqueues one task per channel into that channel's lane: the
// e-mail lane's (a bundled events mail for one person, TypeEventMail
// batches for a topic's readers) and the push lane's (TypePush, one per
// person with a browser to notify). Webhook events are not per person:
// the change that causes one queues it at once (WebhookNotifier), one task
// per endpoint in the webhook lane.
//
// A fan-out that runs twice (a crash, a retry) enqueues nothing twice: a
// fan-out mark per (fan-out key, subscriber) is set once a person's tasks
// are queued and skips them on the next run, and each task's TaskID makes
// a second enqueue of one that is still waiting a conflict. A person whose
// tasks were queued but not yet marked when the fan-out died may get them
// queued again after the first ones finished; their delivery marks make
// those no-ops, so nobody is sent anything twice.

// FanoutPayload is the payload of TypeFanout: an event for one person
// (Email) or for every reader of a topic (Topic), or an issue's push
// notifications (IssueID; its e-mail is the issue planner's).
type FanoutPayload struct {
	// ID names the event ("ev_…"); for an issue, empty.
	ID string `json:"id,omitempty"`
	// SubscriberID is the one person of an event, resolved at intake: a
	// task holds no address, so an erasure leaves none in the queue (the
	// ingress task is kept a day). Email is the older shape, still read
	// while such tasks drain.
	SubscriberID int64     `json:"subscriber_id,omitempty"`
	Email        string    `json:"email,omitempty"`
	Topic        string    `json:"topic,omitempty"`
	IssueID      int64     `json:"issue_id,omitempty"`
	Round        int       `json:"round,omitempty"`
	Topics       []string  `json:"topics,omitempty"` // an issue's audience
	Title        string    `json:"title"`
	Body         string    `json:"body,omitempty"` // the notification's line (issues)
	URL          string    `json:"url,omitempty"`
	At           time.Time `json:"at"`
	// Channels restrict an event to these channels (store.AllChannels'
	// names; empty: every channel each reader chose).
	Channels []string `json:"channels,omitempty"`
	// Markdown is an event's longer body, for the channels that show one
	// (the inbox); Body stays the one line a notification shows.
	Markdown string `json:"markdown,omitempty"`
	// EmailIfUnreadAfter holds the e-mail of the readers who also get
	// the event in a channel that tracks reads: each is mailed only if
	// they have not read it there this long after (IfUnread).
	EmailIfUnreadAfter time.Duration `json:"email_if_unread_after,omitempty"`
}

// IfUnreadPayload is the payload of TypeIfUnread: one reader of one
// event whose e-mail waits on whether they read it on Channel.
type IfUnreadPayload struct {
	Channel      string    `json:"channel"`
	Key          string    `json:"key"` // the fan-out's (FanoutPayload.Key)
	ID           string    `json:"id"`  // the event's
	Topic        string    `json:"topic,omitempty"`
	SubscriberID int64     `json:"subscriber_id"`
	Title        string    `json:"title"`
	URL          string    `json:"url"`
	At           time.Time `json:"at"`
	// Due is when the reader's time to read it is up.
	Due time.Time `json:"due"`
}

// NewIfUnread is the check of p, due at p.Due, once per event and
// reader (its TaskID).
func NewIfUnread(p IfUnreadPayload) *asynq.Task {
	return IfUnread.New(p, asynq.ProcessAt(p.Due))
}

// NewUnreadEvent is the event of p as the person's bundled events mail
// takes it (as NewPersonEvent), under an id of its own per reader: a
// topic's event has many.
func NewUnreadEvent(p IfUnreadPayload) *asynq.Task {
	return Event.New(EventPayload{ID: p.ID, Topic: p.Topic, SubscriberID: p.SubscriberID, Title: p.Title, URL: p.URL, At: p.At.UTC()},
		asynq.Group(EventGroup(p.SubscriberID)), asynq.TaskID("event:"+p.ID+":"+strconv.FormatInt(p.SubscriberID, 10)))
}

// Allows tells whether the fan-out may use channel.
func (p FanoutPayload) Allows(channel string) bool {
	return len(p.Channels) == 0 || slices.Contains(p.Channels, channel)
}

// Key names what is fanned out, for the fan-out and delivery marks:
// "ev:<id>" for an event, "issue:<id>" for an issue.
func (p FanoutPayload) Key() string {
	if p.IssueID > 0 {
		return "issue:" + strconv.FormatInt(p.IssueID, 10)
	}
	return "ev:" + p.ID
}

// FanoutMarkKind is the mark kind of a person whose channel tasks a
// fan-out queued (a shared mark: one bit per subscriber and fan-out).
const FanoutMarkKind = "fanout"

// FanoutTaskID is the ingress task's id: an event's "fanout:ev:<id>", an
// issue round's "fanout:issue:<id>" (round 1) or "fanout:issue:<id>:r<n>".
func FanoutTaskID(p FanoutPayload) string {
	if p.IssueID > 0 && p.Round > 1 {
		return fmt.Sprintf("fanout:%s:r%d", p.Key(), p.Round)
	}
	return "fanout:" + p.Key()
}

// NewFanout is the ingress task of an event or an issue's notifications
// (Fanout).
func NewFanout(p FanoutPayload) *asynq.Task { return Fanout.New(p) }

// NewEventID makes an event's id.
func NewEventID() string { return "ev_" + newNonce() }

// NewPersonEvent is the event of one person as the e-mail lane bundles it
// (TypeEvent, grouped by subscriber: EventGroup), under the fan-out's
// event id: a second enqueue while it waits for its bundle is a conflict.
func NewPersonEvent(id string, subscriber int64, title, url string, at time.Time) *asynq.Task {
	return Event.New(EventPayload{ID: id, SubscriberID: subscriber, Title: title, URL: url, At: at.UTC()},
		asynq.Group(EventGroup(subscriber)), asynq.TaskID("event:"+id))
}

// eventGroupPrefix starts the group of a subscriber's events; a group
// without it is an address (the older shape, grouped by address).
const eventGroupPrefix = "subscriber:"

// EventGroup is the aggregation group of subscriber id's events: named by
// the id, since a group's name is a Redis key and an erasure must leave
// no address behind.
func EventGroup(id int64) string { return eventGroupPrefix + strconv.FormatInt(id, 10) }

// EventGroupSubscriber reads EventGroup back; ok is false for a group
// named by address (the older shape).
func EventGroupSubscriber(group string) (id int64, ok bool) {
	rest, found := strings.CutPrefix(group, eventGroupPrefix)
	if !found {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// EventMailPayload is the payload of TypeEventMail: a topic's event mailed
// to a batch of its readers.
type EventMailPayload struct {
	ID    string  `json:"id"`
	Topic string  `json:"topic"`
	Title string  `json:"title"`
	URL   string  `json:"url"`
	IDs   []int64 `json:"ids"`
	// Engagement is the event's engagement id (store.EventEngagement)
	// when its link goes through the counted redirect; 0: the link is
	// mailed as written (NEWSLETTER_ENGAGEMENT=off, or a batch queued
	// before events were counted).
	Engagement int64 `json:"engagement,omitempty"`
}

// NewEventMail is a batch of a topic event's readers due at due (now, or
// the end of their quiet hours when held is true: then the time is part
// of its id, as for an issue's held batches).
func NewEventMail(p EventMailPayload, due time.Time, held bool) *asynq.Task {
	opts := []asynq.Option{asynq.ProcessAt(due)}
	if held {
		opts = append(opts, asynq.TaskID(fmt.Sprintf("%s:t%d", EventMail.ID(p), due.Unix())))
	}
	return EventMail.New(p, opts...)
}

// PushPayload is the payload of TypePush: one person's notification, to
// each of their browsers. The browsers are read when it runs (one that
// was removed since gets nothing), and the person must then still be
// active with one of Topics.
type PushPayload struct {
	// Key is the fan-out's (FanoutPayload.Key): with the subscriber, the
	// task's id and, with each browser, its delivery marks.
	Key          string   `json:"key"`
	SubscriberID int64    `json:"subscriber_id"`
	Topics       []string `json:"topics"`
	Title        string   `json:"title"`
	Body         string   `json:"body,omitempty"`
	URL          string   `json:"url,omitempty"`
	// At is when an event was posted: the person's notifications go in
	// that order (store.PersonOrder). Zero for an issue's.
	At time.Time `json:"at,omitzero"`
}

// PushTaskID is the id of key's notification to subscriber id.
func PushTaskID(key string, id int64) string { return fmt.Sprintf("push:%s:%d", key, id) }

// pushTimeout is the push task's budget: every browser of a person (at
// most store.MaxPushSubscriptions, one after another, each bounded by the
// push client's own timeout) and the store's round trips.
const pushTimeout = 5 * time.Minute

// NewPush is the notification of p in the push lane (Push).
func NewPush(p PushPayload) *asynq.Task { return Push.New(p) }

// SMSPayload is the payload of TypeSMS: one text of key's (an event's) to
// one person's number.
type SMSPayload struct {
	// Key is the fan-out's (FanoutPayload.Key): with the subscriber, the
	// task's id and the delivery mark.
	Key          string   `json:"key"`
	SubscriberID int64    `json:"subscriber_id"`
	Topics       []string `json:"topics"`
	Text         string   `json:"text"`
	// At is when the event was posted: the person's texts go in that
	// order (store.PersonOrder).
	At time.Time `json:"at,omitzero"`
}

// SMSTaskID is the id of key's text to subscriber id.
func SMSTaskID(key string, id int64) string { return fmt.Sprintf("sms:%s:%d", key, id) }

// NewSMS is p's task (SMS).
func NewSMS(p SMSPayload) *asynq.Task { return SMS.New(p) }

// SMSCodePayload is the payload of TypeSMSCode: the code that proves a
// number a person gave in the preference centre, texted to it.
type SMSCodePayload struct {
	SubscriberID int64  `json:"subscriber_id"`
	Number       string `json:"number"`
	// Code is the code the text carries: recorded as texted once the
	// gateway took it (store.PhoneCodeSent).
	Code string `json:"code"`
	Text string `json:"text"`
	// Until is when the code ends: a text that could not go by then is
	// dropped.
	Until time.Time `json:"until"`
}

// NewSMSCode is p's task (SMSCode).
func NewSMSCode(p SMSCodePayload) *asynq.Task { return SMSCode.New(p) }
