package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Aggregator is the worker's GroupAggregator: it turns one person's queued
// events (group = tasks.EventGroup, or the address in the older shape)
// into one email:events task listing them all.
// asynq hands it at most NEWSLETTER_GROUP_MAX_SIZE events, so more make
// several mails. After a crash asynq may hand over the same events again:
// the handler's delivery mark, keyed by the events' ids, makes that a no-op.
func Aggregator(log *slog.Logger) asynq.GroupAggregator {
	return asynq.GroupAggregatorFunc(func(group string, events []*asynq.Task) *asynq.Task {
		bundle := tasks.EventsPayload{}
		if id, ok := tasks.EventGroupSubscriber(group); ok {
			bundle.SubscriberID = id
		} else {
			bundle.Email = group // grouped by address: the older shape
		}
		for _, t := range events {
			var e tasks.EventPayload
			if err := json.Unmarshal(t.Payload(), &e); err != nil || e.ID == "" {
				log.Error("events: dropping an unreadable event", "err", err)
				continue
			}
			bundle.Events = append(bundle.Events, e)
		}
		return tasks.NewEventsEmail(bundle)
	})
}

// bundleKey names a bundle by its events, whatever their order.
func bundleKey(events []tasks.EventPayload) string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	return hex.EncodeToString(sum[:12])
}

// EventSender handles email:events: one subscriber's bundle of
// notifications as one mail.
type EventSender struct {
	Deliver *Deliverer
	Links   Links
	Quiet   *quiet.Hours
	Now     func() time.Time
	// Store gives each event's link its engagement id, as a topic
	// event's (nil: links as written).
	Store EventLinks
}

// EventLinks is what counting an event's link needs of the store.
type EventLinks interface {
	EventEngagement(ctx context.Context, eventID string) (int64, error)
	SetIssueLinks(ctx context.Context, issueID int64, urls []string) error
}

// countedURL is e's link as this reader's counted redirect: the event's
// engagement id (the same on every run: store.EventEngagement) with its
// one link stored first. Each event of a bundle has its own id, so the
// reader's part is signed per link here, not left to the mail's
// ReaderMark. Each read waits out a Redis outage as the delivery does.
func (h *EventSender) countedURL(ctx context.Context, e tasks.EventPayload, reader int64, now time.Time) (string, error) {
	if h.Store == nil || !h.Links.Counts(e.URL) {
		return e.URL, nil
	}
	eng, err := h.Store.EventEngagement(ctx, e.ID)
	if err != nil {
		return "", err
	}
	if err := h.Store.SetIssueLinks(ctx, eng, []string{e.URL}); err != nil {
		return "", err
	}
	return strings.Replace(h.Links.CountedLink(eng, e.URL), mailer.ReaderMark, h.Links.Reader(eng, reader, now), 1), nil
}

// HandleEventsEmail sends the bundle. Inside quiet hours it waits for
// their end.
func (h *EventSender) HandleEventsEmail(ctx context.Context, p tasks.EventsPayload) error {
	var sub store.Subscriber
	var ok bool
	var err error
	if p.SubscriberID > 0 {
		sub, ok, err = h.Deliver.RecipientByID(ctx, p.SubscriberID, store.Active)
	} else {
		sub, ok, err = h.Deliver.Recipient(ctx, p.Email, store.Active)
	}
	if !ok {
		return err
	}
	// A person's own events are updates; a topic's event comes into the
	// bundle unread in the inbox (IfUnread), and goes to its readers.
	events := slices.DeleteFunc(slices.Clone(p.Events), func(e tasks.EventPayload) bool {
		return !slices.Contains(sub.Topics, cmp.Or(e.Topic, topics.Updates))
	})
	if len(events) == 0 {
		h.Deliver.Log.Info("skip: events to a subscriber without their topics", "subscriber", sub.ID)
		return nil
	}
	now := h.Now()
	if until := h.Quiet.Until(sub.Timezone, now); !until.IsZero() {
		return &Deferred{Reason: "quiet hours", In: until.Sub(now)}
	}
	// The bundle lists the person's events in the order they were posted,
	// whatever order the group handed them in.
	slices.SortStableFunc(events, func(a, b tasks.EventPayload) int { return a.At.Compare(b.At) })
	entries := make([]mailer.Entry, len(events))
	for i, e := range events {
		link, err := h.countedURL(ctx, e, sub.ID, now)
		if err != nil {
			return err
		}
		entries[i] = mailer.Entry{Title: e.Title, URL: link}
	}
	data := h.Links.For(sub, cmp.Or(events[0].Topic, topics.Updates))
	data.Entries = entries
	return h.Deliver.DeliverOne(ctx, Mail{
		To:   sub,
		Mark: store.Mark{Kind: mailer.KindEvents, Key: bundleKey(p.Events), SubscriberID: sub.ID},
		Data: data,
	})
}
