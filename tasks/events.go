package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// Aggregator is the worker's GroupAggregator: it turns one person's queued
// events (group = address) into one email:events task listing them all.
// asynq hands it at most NEWSLETTER_GROUP_MAX_SIZE events, so more make
// several mails. After a crash asynq may hand over the same events again:
// the handler's delivery mark, keyed by the events' ids, makes that a no-op.
func Aggregator(log *slog.Logger) asynq.GroupAggregator {
	return asynq.GroupAggregatorFunc(func(group string, tasks []*asynq.Task) *asynq.Task {
		bundle := EventsPayload{Email: group}
		for _, t := range tasks {
			var e EventPayload
			if err := json.Unmarshal(t.Payload(), &e); err != nil || e.ID == "" {
				log.Error("events: dropping an unreadable event", "group", group, "err", err)
				continue
			}
			bundle.Events = append(bundle.Events, e)
		}
		p, _ := json.Marshal(bundle)
		return asynq.NewTask(TypeEventsEmail, p, asynq.MaxRetry(10), asynq.Timeout(2*time.Minute))
	})
}

// bundleKey names a bundle by its events, whatever their order.
func bundleKey(events []EventPayload) string {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	return hex.EncodeToString(sum[:12])
}

// HandleEventsEmail sends one subscriber's bundle of notifications as one
// mail. Inside quiet hours it waits for their end.
func (h *Handlers) HandleEventsEmail(ctx context.Context, t *asynq.Task) error {
	var p EventsPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if p.Email == "" || len(p.Events) == 0 {
		return errMissing(t, "email and events")
	}
	sub, ok, err := h.recipient(ctx, p.Email, store.Active)
	if !ok {
		return err
	}
	if until := h.quiet().until(sub.Timezone, h.now()); !until.IsZero() {
		return &Deferred{Reason: "quiet hours", In: until.Sub(h.now())}
	}
	entries := make([]mailer.Entry, len(p.Events))
	for i, e := range p.Events {
		entries[i] = mailer.Entry{Title: e.Title, URL: e.URL}
	}
	data := mailer.Data{Email: sub.Email, Name: sub.Name, Entries: entries, UnsubscribeURL: h.Links.Unsubscribe(sub.Email)}
	return h.deliver(ctx, sub, store.Mark{Kind: mailer.KindEvents, Key: bundleKey(p.Events), SubscriberID: sub.ID}, data)
}
