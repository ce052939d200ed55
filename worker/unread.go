package worker

// The e-mail an event's reader gets only if they have not read it in a
// channel that tracks reads (the events API's "email_if_unread_after"):
// the fan-out holds it (holdUnread) and an IfUnread task checks at its
// time (HandleIfUnread).

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// holdUnread splits an event's e-mail readers (mail) by
// "email_if_unread_after": those who also get it in a channel that
// tracks reads wait for their IfUnread check; the rest are mailed now.
func (h *FanoutSender) holdUnread(p tasks.FanoutPayload, key string, todo []int64, chans []store.Channels, mail []int64) ([]int64, []*asynq.Task) {
	if p.EmailIfUnreadAfter <= 0 || p.IssueID > 0 || len(mail) == 0 {
		return mail, nil
	}
	held := map[int64]string{}
	for _, c := range h.Added {
		if h.Trackers[c.Name] == nil {
			continue
		}
		for _, id := range chosenAdded(p, todo, chans, c) {
			if _, ok := held[id]; !ok {
				held[id] = c.Name
			}
		}
	}
	if len(held) == 0 {
		return mail, nil
	}
	topic := p.Topic
	var now []int64
	var checks []*asynq.Task
	for _, id := range mail {
		channel, ok := held[id]
		if !ok {
			now = append(now, id)
			continue
		}
		checks = append(checks, tasks.NewIfUnread(tasks.IfUnreadPayload{
			Channel: channel, Key: key, ID: p.ID, Topic: topic, SubscriberID: id,
			Title: p.Title, URL: p.URL, At: p.At, Due: p.At.Add(p.EmailIfUnreadAfter),
		}))
	}
	return now, checks
}

// notDeliveredGrace is how long after its time is up an IfUnread check
// waits for its channel to have the message at all (a lane behind, or
// paused): then the reader is mailed, as the fallback the e-mail is.
const notDeliveredGrace = time.Hour

// HandleIfUnread mails one reader an event they have not read in the
// channel that tracks reads (TypeIfUnread), into their bundled events
// mail: several due together go in one mail (the bundle's grace period),
// and the event's task id per reader keeps it to one.
func (h *FanoutSender) HandleIfUnread(ctx context.Context, p tasks.IfUnreadPayload) error {
	subs, err := h.Store.SubscribersByID(ctx, []int64{p.SubscriberID})
	if err != nil {
		return err
	}
	if len(subs) == 0 || subs[0].ID == 0 || subs[0].Status != store.Active {
		return nil
	}
	sub := subs[0]
	if tr := h.Trackers[p.Channel]; tr != nil {
		state, err := tr.Unread(ctx, channels.Person{ID: sub.ID, Email: sub.Email, Timezone: sub.Timezone}, p.Key)
		if err != nil {
			return fmt.Errorf("if unread: ask %s: %w", p.Channel, err)
		}
		switch state {
		case channels.IsRead:
			h.Log.Debug("if unread: read, not mailed", "subscriber", sub.ID, "event", p.ID)
			return nil
		case channels.NotDelivered:
			sent, err := h.Store.SentMarks(ctx, []store.Mark{channelMark(p.Channel, p.Key, sub.ID, strconv.FormatInt(sub.ID, 10))})
			if err != nil {
				return err
			}
			if sent[0] {
				return nil // delivered, and gone since: erased, or aged out
			}
			if now := h.Now(); now.Before(p.Due.Add(notDeliveredGrace)) {
				return &Deferred{Reason: "the " + p.Channel + " channel has not got the event yet", In: time.Minute}
			}
		}
	}
	// Unread, or its channel is off now, or never got it: the e-mail is
	// the fallback.
	return enqueueOnce(ctx, h.Queue, tasks.NewUnreadEvent(p))
}
