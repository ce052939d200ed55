package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// ChannelStore is what the generic lane needs of the store.
type ChannelStore interface {
	GetByID(ctx context.Context, id int64) (store.Subscriber, error)
	OrderStore
	store.Marks
}

// ChannelLane is the one handler of every channel added through the seam
// (channels.Plugin): it runs "<name>:deliver" in the channel's own lane.
// It does for any channel what the built-in lanes do by hand: the
// person's order of events, the check that they still want it, one
// delivery mark per address (a retry never sends twice but for a worker
// killed between the provider's answer and the mark), batches of the
// channel's MaxBatch, and each Outcome applied: Sent marks, Retry comes
// back no sooner than the provider asked, Retire forgets the address
// (channels.Retirer), Drop keeps it, Pause holds the whole lane.
type ChannelLane struct {
	Channel  channels.Channel
	Store    ChannelStore
	Retry    RetryPolicy
	ClaimTTL time.Duration
	Now      func() time.Time
	Metrics  *Metrics
	Log      *slog.Logger

	mu          sync.Mutex
	pausedUntil time.Time
}

// Name is the channel's, and its lane's.
func (h *ChannelLane) Name() string { return h.Channel.Spec().Name }

// Handle handles "<name>:deliver".
func (h *ChannelLane) Handle(ctx context.Context, p tasks.DeliverPayload) error {
	return inOrder(ctx, h.Store, h.Name(), p.Key, p.SubscriberID, p.At, func() error { return h.deliver(ctx, p) })
}

// deliver is Handle once the event's turn has come for its person.
func (h *ChannelLane) deliver(ctx context.Context, p tasks.DeliverPayload) error {
	if wait := h.paused(); wait > 0 {
		return &Deferred{Reason: "the " + h.Name() + " provider asked for a pause", In: wait}
	}
	sub, err := h.Store.GetByID(ctx, p.SubscriberID)
	if errors.Is(err, store.ErrNotFound) {
		h.count("dropped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: load subscriber: %w", h.Name(), err)
	}
	if sub.Status != store.Active || !slices.ContainsFunc(p.Topics, func(tp string) bool { return slices.Contains(sub.Topics, tp) }) {
		h.count("dropped")
		return nil
	}
	ev := channels.Event{
		Key: p.Key, Person: channels.Person{ID: sub.ID, Email: sub.Email, Timezone: sub.Timezone},
		Topics: p.Topics, Title: p.Title, Body: p.Body, URL: p.URL, At: p.At,
	}
	msgs, marks, err := h.messages(ctx, ev)
	if err != nil || len(msgs) == 0 {
		return err
	}
	owner, _ := asynq.GetTaskID(ctx)
	claims, err := h.Store.ClaimMarks(ctx, owner, marks, h.ClaimTTL)
	if err != nil {
		return fmt.Errorf("%s: claim: %w", h.Name(), err)
	}
	var todo []int
	var busy error
	for i, c := range claims {
		switch c {
		case store.Claimed:
			todo = append(todo, i)
		case store.Busy:
			busy = ErrDeliveryBusy
		}
	}
	return errors.Join(h.sendAll(ctx, sub.ID, msgs, marks, todo), busy)
}

// messages are the event's messages to each of the person's addresses on
// the channel, and their delivery marks; a message that cannot be made is
// left out (logged and counted dead: it never could be).
func (h *ChannelLane) messages(ctx context.Context, ev channels.Event) ([]channels.Message, []store.Mark, error) {
	to := []string{strconv.FormatInt(ev.Person.ID, 10)}
	if a, ok := h.Channel.(channels.Addresser); ok {
		var err error
		if to, err = a.Addresses(ctx, ev.Person); err != nil {
			return nil, nil, fmt.Errorf("%s: the person's addresses: %w", h.Name(), err)
		}
	}
	var msgs []channels.Message
	var marks []store.Mark
	for _, addr := range to {
		m, err := h.compose(ev, addr)
		if err != nil {
			h.Log.Warn(h.Name()+": message not made, dropped", "subscriber", ev.Person.ID, "err", err)
			h.count("dead")
			continue
		}
		msgs = append(msgs, m)
		marks = append(marks, channelMark(h.Name(), ev.Key, ev.Person.ID, addr))
	}
	return msgs, marks, nil
}

// compose is the channel's message to one address: its Composer's, or
// the event as JSON; over the channel's MaxBody it is an error.
func (h *ChannelLane) compose(ev channels.Event, to string) (channels.Message, error) {
	var m channels.Message
	if c, ok := h.Channel.(channels.Composer); ok {
		var err error
		if m, err = c.Compose(ev, to); err != nil {
			return m, err
		}
	} else {
		body, err := json.Marshal(channels.MessageOf(ev))
		if err != nil {
			return m, err
		}
		m = channels.Message{To: to, Body: body}
	}
	if limit := h.Channel.Spec().MaxBody; limit > 0 && len(m.Body) > limit {
		return m, fmt.Errorf("message of %d bytes, over the channel's %d", len(m.Body), limit)
	}
	return m, nil
}

// channelMark is the delivery mark of key's message to one address of
// subscriber id on channel name.
func channelMark(name, key string, id int64, to string) store.Mark {
	sum := sha256.Sum256([]byte(to))
	return store.Mark{Kind: name, Key: key + ":" + hex.EncodeToString(sum[:8]), SubscriberID: id}
}

// sendAll sends the claimed messages (todo: their indexes) in batches of
// the channel's MaxBatch and applies each Outcome; the first retry's
// error is the task's.
func (h *ChannelLane) sendAll(ctx context.Context, subID int64, msgs []channels.Message, marks []store.Mark, todo []int) error {
	size := max(1, h.Channel.Spec().MaxBatch)
	var retry error
	for start := 0; start < len(todo); start += size {
		idx := todo[start:min(start+size, len(todo))]
		batch := make([]channels.Message, len(idx))
		for i, at := range idx {
			batch[i] = msgs[at]
		}
		outs := h.Channel.Send(ctx, batch)
		for i, at := range idx {
			out := channels.Outcome{Verdict: channels.Retry, Err: errors.New("the channel answered no outcome")}
			if i < len(outs) {
				out = outs[i]
			}
			if err := h.apply(ctx, subID, batch[i], marks[at], out); err != nil && retry == nil {
				retry = err
			}
		}
	}
	return retry
}

// apply settles one message's mark by its Outcome.
func (h *ChannelLane) apply(ctx context.Context, subID int64, m channels.Message, mark store.Mark, out channels.Outcome) error {
	if out.Verdict == channels.Sent {
		// Not under the task's context: the message is out, its mark must
		// be written even if the task was cancelled.
		if err := h.Store.MarkSent(context.WithoutCancel(ctx), mark); err != nil {
			h.Log.Error(h.Name()+": mark sent failed after delivery", "subscriber", subID, "err", err)
		}
		h.count(out.Verdict.String())
		return nil
	}
	if err := h.Store.ReleaseMarks(context.WithoutCancel(ctx), []store.Mark{mark}); err != nil {
		h.Log.Warn(h.Name()+": claim not released", "err", err) // it expires (ClaimTTL)
	}
	switch out.Verdict {
	case channels.Retire:
		if r, ok := h.Channel.(channels.Retirer); ok {
			if err := r.Retire(ctx, m.To); err != nil {
				return fmt.Errorf("%s: retire an address: %w", h.Name(), err)
			}
		}
		h.Log.Info(h.Name()+": address dead, retired", "subscriber", subID, "err", out.Err)
		h.count("dropped")
		return nil
	case channels.Drop:
		h.Log.Warn(h.Name()+": refused, not retried", "subscriber", subID, "err", out.Err)
		h.count("dead")
		return nil
	case channels.Pause:
		h.pause(out.After)
	}
	h.count("retry")
	msg := h.Name() + ": retry"
	if out.Err != nil {
		msg = h.Name() + ": " + out.Err.Error()
	}
	return &deliveryFailure{msg: msg, wait: out.After}
}

// pause holds the lane (in this process) for d; a provider that asks for
// a pause without saying how long gets a minute.
func (h *ChannelLane) pause(d time.Duration) {
	if d <= 0 {
		d = time.Minute
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if until := h.now().Add(d); until.After(h.pausedUntil) {
		h.pausedUntil = until
	}
}

// paused is how much longer the lane is held (0: not).
func (h *ChannelLane) paused() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pausedUntil.Sub(h.now())
}

func (h *ChannelLane) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// RetryDelay is the lane's asynq RetryDelayFunc: a deferral's wait, the
// provider's Retry-After when longer than the lane's backoff, or the
// backoff.
func (h *ChannelLane) RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	return h.Retry.ProviderDelay(n, err, t)
}

func (h *ChannelLane) count(result string) {
	if h.Metrics != nil {
		h.Metrics.Notifications.WithLabelValues(h.Name(), result).Inc()
	}
}

// AddedChannel is what the fan-out knows of a channel added through the
// seam: its name, and whether a topic has it until the person chooses.
type AddedChannel struct {
	Name      string
	DefaultOn bool
}

// addedChannel is the registered channel name's AddedChannel.
func addedChannel(name string) AddedChannel {
	for _, c := range tasks.AddedChannels() {
		if c.Name == name {
			return AddedChannel{Name: name, DefaultOn: c.DefaultOn}
		}
	}
	return AddedChannel{Name: name}
}

// chosenAdded is the readers among todo who get p by the added channel
// c: the fan-out allows it, and each chose it (chans, lined up with todo)
// for one of the topics they get it as, or did not choose for that topic
// and c is on by default. An issue goes to no added channel (its mail is
// the issue planner's; its notifications are push).
func chosenAdded(p tasks.FanoutPayload, todo []int64, chans []store.Channels, c AddedChannel) []int64 {
	if p.IssueID > 0 || !p.Allows(c.Name) {
		return nil
	}
	var out []int64
	for i, id := range todo {
		if slices.ContainsFunc(fanoutTopics(p), func(tp string) bool { return chans[i].WantsOr(tp, c.Name, c.DefaultOn) }) {
			out = append(out, id)
		}
	}
	return out
}

// deliverTasks are the "<name>:deliver" tasks of an event to the readers
// ids on channel name.
func deliverTasks(p tasks.FanoutPayload, key, name string, ids []int64) []*asynq.Task {
	var out []*asynq.Task
	for _, id := range ids {
		t := tasks.NewDeliver(tasks.DeliverPayload{
			Channel: name, Key: key, SubscriberID: id, Topics: fanoutTopics(p),
			Title: p.Title, Body: cmp.Or(p.Markdown, p.Body), URL: p.URL, At: p.At,
		})
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}
