package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// DefaultFanoutPage is how many readers the fan-out reads, checks and
// enqueues for at a time: a few round trips per page, whatever its size.
const DefaultFanoutPage = 500

// fanoutEnqueuers is how many push tasks of a page are enqueued at once:
// each is a round trip, and a page's worth one after another would make
// the fan-out wait on the network, not on Redis.
const fanoutEnqueuers = 8

// FanoutStore is what the fan-out needs of the store.
type FanoutStore interface {
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
	HavePushSubscriptions(ctx context.Context, ids []int64) ([]bool, error)
	ChannelsOf(ctx context.Context, ids []int64) ([]store.Channels, error)
	QueueInOrder(ctx context.Context, channel, key string, at time.Time, ids []int64) error
	SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error)
	IssueStatus(ctx context.Context, id int64) (store.IssueStatus, error)
	EventEngagement(ctx context.Context, eventID string) (int64, error)
	SetIssueLinks(ctx context.Context, issueID int64, urls []string) error
	store.Marks
}

// FanoutSender handles event:fanout, the one ingress task of an event or
// of an issue's notifications: it walks the audience and enqueues one
// task per person and channel, each into its lane (tasks/fanout.go). It
// reads and enqueues only, never waits on a provider, so a channel whose
// provider hangs backs up its own lane and nothing else. It also sends a
// topic event's mail batches (email:event).
type FanoutSender struct {
	Store   FanoutStore
	Deliver *Deliverer
	Queue   tasks.Enqueuer
	Links   Links
	Quiet   *quiet.Hours
	Page    int // DefaultFanoutPage
	// MailBatch is readers per email:event batch (DefaultDigestBatch).
	MailBatch int
	Now       func() time.Time
	Log       *slog.Logger

	// Added are the channels added through the seam: each reader who
	// chose one for the event's topic gets a "<name>:deliver" task.
	Added []AddedChannel
	// Trackers are the added channels that know whether a reader read a
	// message (channels.ReadTracker), by name: an event with
	// "email_if_unread_after" mails their readers only if unread.
	Trackers map[string]channels.ReadTracker

	prepMu   sync.Mutex
	prepared map[string]*mailer.Prepared
}

// HandleFanout fans an event or an issue's notifications out. An event
// for one person goes to their bundled events mail and their browsers; an
// event for a topic to a batch mail per page of its readers and to each
// reader's browsers; an issue to its readers' browsers (its mail is the
// issue planner's). Only active readers with the topic (updates, for one
// person) get anything; each channel's handler checks again when it runs.
func (h *FanoutSender) HandleFanout(ctx context.Context, p tasks.FanoutPayload) error {
	switch {
	case p.IssueID > 0:
		return h.walk(ctx, p, p.Topics, 0)
	case p.SubscriberID > 0 || p.Email != "":
		sub, ok, err := h.person(ctx, p)
		if !ok {
			return err
		}
		if !slices.Contains(sub.Topics, topics.Updates) {
			h.Log.Info("skip: event for a subscriber without updates", "subscriber", sub.ID)
			return nil
		}
		return h.page(ctx, p, []int64{sub.ID}, 0)
	default: // a topic: tasks.Fanout's Check lets nothing else through
		eng, err := h.eventEngagement(ctx, p)
		if err != nil {
			return err
		}
		return h.walk(ctx, p, []string{p.Topic}, eng)
	}
}

// eventEngagement is the engagement id a topic event's mails count its
// link under (store.EventEngagement: the same on every run of the
// fan-out), with the link stored for the redirect before any mail is
// queued; 0 when its link is mailed as written (links not counted, a
// link to the service's own pages, no e-mail for this event).
func (h *FanoutSender) eventEngagement(ctx context.Context, p tasks.FanoutPayload) (int64, error) {
	if !p.Allows(store.ChannelEmail) || !h.Links.Counts(p.URL) {
		return 0, nil
	}
	st := h.Store
	eng, err := st.EventEngagement(ctx, p.ID)
	if err != nil {
		return 0, err
	}
	if err := st.SetIssueLinks(ctx, eng, []string{p.URL}); err != nil {
		return 0, err
	}
	return eng, nil
}

// person is the one active subscriber of an event: by id, or by the
// address of a task queued before events named people by id.
func (h *FanoutSender) person(ctx context.Context, p tasks.FanoutPayload) (store.Subscriber, bool, error) {
	if p.SubscriberID > 0 {
		return h.Deliver.RecipientByID(ctx, p.SubscriberID, store.Active)
	}
	return h.Deliver.Recipient(ctx, p.Email, store.Active)
}

// walk fans p out to the active readers of any of topicIDs, page by page
// (eng: the event's engagement id, mailTasks).
// It starts at the beginning every time: the fan-out marks skip whoever a
// previous run did, at a bit per reader. Each read waits out a Redis
// outage, as the issue planner's do: each topic's page on its own, so a
// blip costs one page's read again, not the whole union's.
func (h *FanoutSender) walk(ctx context.Context, p tasks.FanoutPayload, topicIDs []string, eng int64) error {
	size := h.Page
	st := h.Store
	var cursor int64
	pages := lookahead{page: size, read: func(cursor int64, limit int) ([]int64, error) {
		return audienceAny(ctx, st, topicIDs, cursor, limit)
	}}
	for {
		if p.IssueID > 0 {
			// A paused or cancelled issue notifies nobody more; a resume
			// fans out again in its own round.
			is, err := st.IssueStatus(ctx, p.IssueID)
			if errors.Is(err, store.ErrNoIssue) {
				return fmt.Errorf("issue %d: %w", p.IssueID, asynq.SkipRetry)
			}
			if err != nil {
				return err
			}
			if is.Status != store.IssueSending || is.Round != p.Round {
				h.Log.Info("fanout: issue not sending; notifications stopped", "issue", p.IssueID, "status", is.Status)
				return nil
			}
		}
		ids, err := pages.next(cursor)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := h.page(ctx, p, ids, eng); err != nil {
			return err
		}
		cursor = ids[len(ids)-1]
	}
}

// page queues the channel tasks of the readers ids that no earlier run
// queued, then marks them.
func (h *FanoutSender) page(ctx context.Context, p tasks.FanoutPayload, ids []int64, eng int64) error {
	if p.IssueID > 0 {
		// An issue's fan-out is push alone: only readers with a browser
		// get a task, so only they need a mark. Most readers have none,
		// and looking for browsers first spares them two commands each
		// (the mark's read and write) on every issue.
		with, err := h.withBrowsers(ctx, ids)
		if err != nil {
			return err
		}
		if len(with) == 0 {
			return nil
		}
		ids = with
	}
	key := p.Key()
	todo, todoMarks, err := h.notQueued(ctx, key, ids)
	if err != nil {
		return err
	}
	if len(todo) == 0 {
		return nil
	}
	chans, err := h.Store.ChannelsOf(ctx, todo)
	if err != nil {
		return err
	}
	wants := func(channel string) []int64 { return chosen(p, todo, chans, channel) }
	mailNow, ifUnread := h.holdUnread(p, key, todo, chans, wants(store.ChannelEmail))
	queue := h.mailTasks(p, ids, mailNow, eng)
	queue = append(queue, ifUnread...)
	pushes, err := h.pushTasks(ctx, p, key, wants(store.ChannelPush))
	if err != nil {
		return err
	}
	queue = append(queue, pushes...)
	texts := smsTasks(p, key, wants(store.ChannelSMS))
	queue = append(queue, texts...)
	ordered := map[string][]*asynq.Task{store.ChannelPush: pushes, store.ChannelSMS: texts}
	for _, c := range h.Added {
		ts := deliverTasks(p, key, c.Name, chosenAdded(p, todo, chans, c))
		ordered[c.Name] = ts
		queue = append(queue, ts...)
	}
	if err := h.noteOrder(ctx, p, key, ordered); err != nil {
		return err
	}
	if err := h.enqueue(ctx, queue); err != nil {
		return err
	}
	return h.Store.MarkSent(ctx, todoMarks...)
}

// fanoutTopics are the topics a fan-out's readers get it as: the one
// person's updates, the event's topic, or the issue's topics.
func fanoutTopics(p tasks.FanoutPayload) []string {
	switch {
	case p.SubscriberID > 0 || p.Email != "":
		return []string{topics.Updates}
	case p.Topic != "":
		return []string{p.Topic}
	}
	return p.Topics
}

// chosen is the readers among todo who get p by channel: the fan-out
// allows it, and each chose it (chans, lined up with todo) for one of
// the topics they get it as.
func chosen(p tasks.FanoutPayload, todo []int64, chans []store.Channels, channel string) []int64 {
	if !p.Allows(channel) {
		return nil
	}
	var out []int64
	for i, id := range todo {
		if slices.ContainsFunc(fanoutTopics(p), func(tp string) bool { return chans[i].Wants(tp, channel) }) {
			out = append(out, id)
		}
	}
	return out
}

// smsTasks are the texts of an event to the readers todo who chose SMS
// (an issue is not texted: it is a mail). The text is the event's title
// and link; the sms lane checks the number, its state and the length.
func smsTasks(p tasks.FanoutPayload, key string, todo []int64) []*asynq.Task {
	if p.IssueID > 0 {
		return nil
	}
	text := p.Title
	if p.URL != "" {
		text += " " + p.URL
	}
	var queue []*asynq.Task
	for _, id := range todo {
		queue = append(queue, tasks.NewSMS(tasks.SMSPayload{Key: key, SubscriberID: id, Topics: fanoutTopics(p), Text: text, At: p.At}))
	}
	return queue
}

// noteOrder notes an event's tasks of the channels that keep a person's
// order (push, SMS and the added channels; byChannel) in their people's
// order (store.PersonOrder) before they are queued, so that none can run
// ahead of an event posted before it. An issue's notifications are not in
// it.
func (h *FanoutSender) noteOrder(ctx context.Context, p tasks.FanoutPayload, key string, byChannel map[string][]*asynq.Task) error {
	if p.IssueID > 0 {
		return nil
	}
	for channel, ts := range byChannel {
		if len(ts) == 0 {
			continue
		}
		orders := []string{channel}
		if channel == store.ChannelPush {
			orders = pushOrders // one per way a notification goes
		}
		ids := make([]int64, len(ts))
		for i, t := range ts {
			var who struct {
				SubscriberID int64 `json:"subscriber_id"`
			}
			if err := json.Unmarshal(t.Payload(), &who); err != nil {
				return fmt.Errorf("fanout: %w", err)
			}
			ids[i] = who.SubscriberID
		}
		for _, order := range orders {
			if err := h.Store.QueueInOrder(ctx, order, key, p.At, ids); err != nil {
				return err
			}
		}
	}
	return nil
}

// withBrowsers is the readers among ids with a browser to notify.
func (h *FanoutSender) withBrowsers(ctx context.Context, ids []int64) ([]int64, error) {
	have, err := h.Store.HavePushSubscriptions(ctx, ids)
	if err != nil {
		return nil, err
	}
	var with []int64
	for i, id := range ids {
		if have[i] {
			with = append(with, id)
		}
	}
	return with, nil
}

// notQueued is the readers among ids whose tasks no earlier run of the
// fan-out (key) queued, and their marks, written once their tasks are.
func (h *FanoutSender) notQueued(ctx context.Context, key string, ids []int64) (todo []int64, todoMarks []store.Mark, err error) {
	marks := make([]store.Mark, len(ids))
	for i, id := range ids {
		marks[i] = store.Mark{Kind: tasks.FanoutMarkKind, Key: key, SubscriberID: id, Shared: true}
	}
	done, err := h.Store.SentMarks(ctx, marks)
	if err != nil {
		return nil, nil, err
	}
	for i, id := range ids {
		if !done[i] {
			todo, todoMarks = append(todo, id), append(todoMarks, marks[i])
		}
	}
	return todo, todoMarks, nil
}

// mailTasks are the e-mail tasks for the readers todo (of the page ids):
// one person's event joins their bundle; a topic's goes in batches, its
// link counted under eng (0: mailed as written). An issue's mail is its
// planner's.
func (h *FanoutSender) mailTasks(p tasks.FanoutPayload, ids, todo []int64, eng int64) []*asynq.Task {
	var queue []*asynq.Task
	switch {
	case p.IssueID > 0:
	case p.SubscriberID > 0 || p.Email != "":
		// ids[0] is the person, whichever shape named them; todo is
		// empty when they turned e-mail off for updates.
		if len(todo) > 0 {
			queue = append(queue, tasks.NewPersonEvent(p.ID, ids[0], p.Title, p.URL, p.At))
		}
	default:
		for part := range slices.Chunk(todo, h.MailBatch) {
			queue = append(queue, tasks.NewEventMail(tasks.EventMailPayload{
				ID: p.ID, Topic: p.Topic, Title: p.Title, URL: p.URL, IDs: part, Engagement: eng,
			}, h.Now(), false))
		}
	}
	return queue
}

// pushTasks are the push tasks for the readers todo: one per reader with
// a browser. An issue's readers were cut to those already (page), so
// only an event's are looked up here.
func (h *FanoutSender) pushTasks(ctx context.Context, p tasks.FanoutPayload, key string, todo []int64) ([]*asynq.Task, error) {
	var have []bool
	if p.IssueID == 0 {
		var err error
		if have, err = h.Store.HavePushSubscriptions(ctx, todo); err != nil {
			return nil, err
		}
	}
	topicsOf := p.Topics
	switch {
	case p.SubscriberID > 0 || p.Email != "":
		topicsOf = []string{topics.Updates}
	case p.Topic != "":
		topicsOf = []string{p.Topic}
	}
	var queue []*asynq.Task
	for i, id := range todo {
		if p.IssueID > 0 || have[i] {
			pp := tasks.PushPayload{Key: key, SubscriberID: id, Topics: topicsOf, Title: p.Title, Body: p.Body, URL: p.URL}
			if p.IssueID == 0 {
				pp.At = p.At // an event's: in the person's order
			}
			queue = append(queue, tasks.NewPush(pp))
		}
	}
	return queue, nil
}

// enqueue puts the tasks in their queues, a few at a time (a TaskID
// conflict is a task an earlier run queued, done: enqueueOnce).
func (h *FanoutSender) enqueue(ctx context.Context, queue []*asynq.Task) error {
	work := make(chan *asynq.Task)
	errs := make(chan error, fanoutEnqueuers)
	var wg sync.WaitGroup
	for range min(fanoutEnqueuers, len(queue)) {
		wg.Go(func() {
			var first error
			for t := range work {
				if first != nil {
					continue
				}
				if err := enqueueOnce(ctx, h.Queue, t); err != nil {
					first = fmt.Errorf("fanout: %w", err)
				}
			}
			errs <- first
		})
	}
	for _, t := range queue {
		work <- t
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// HandleEventMail sends a topic's event to a batch of its readers: one
// mail each, under a delivery mark per (event, reader), so a retried or
// re-queued batch sends only what is missing. A reader who left or turned
// the topic off since is skipped; one inside quiet hours moves to a batch
// of their own due when they end.
func (h *FanoutSender) HandleEventMail(ctx context.Context, p tasks.EventMailPayload) error {
	subs, err := h.Store.SubscribersByID(ctx, p.IDs)
	if err != nil {
		return err
	}
	shared := h.Links.Stream(p.Topic)
	// The link goes through the counted redirect as an issue's do (its
	// target stored by the fan-out); each reader's mail carries their
	// part of the token (Reader).
	shared.Entries = []mailer.Entry{{Title: p.Title, URL: h.Links.CountedLink(p.Engagement, p.URL)}}
	prep, err := h.prepare(p.ID, shared)
	if err != nil {
		return fmt.Errorf("prepare event mail: %v: %w", err, asynq.SkipRetry)
	}
	now := h.Now()
	var mails []Mail
	held := map[time.Time][]int64{}
	for _, s := range subs {
		switch until := h.Quiet.Until(s.Timezone, now); {
		case s.ID == 0 || s.Status != store.Active || !slices.Contains(s.Topics, p.Topic):
		case !until.IsZero():
			held[until] = append(held[until], s.ID)
		default:
			d := h.Links.To(shared, s, p.Topic)
			if p.Engagement > 0 {
				d.Reader = h.Links.Reader(p.Engagement, s.ID, now)
			}
			mails = append(mails, Mail{
				To:       s,
				Mark:     store.Mark{Kind: mailer.KindEvents, Key: "ev:" + p.ID, SubscriberID: s.ID, Shared: true},
				Data:     d,
				Prepared: prep,
			})
		}
	}
	for until, ids := range held {
		later := p
		later.IDs = ids
		if err := enqueueOnce(ctx, h.Queue, tasks.NewEventMail(later, until, true)); err != nil {
			return fmt.Errorf("defer quiet recipients: %w", err)
		}
	}
	if len(mails) == 0 {
		return nil
	}
	_, retry := h.Deliver.Deliver(ctx, mails)
	return retry
}

// prepare renders an event's mail once per worker for all its batches.
func (h *FanoutSender) prepare(id string, shared mailer.Data) (*mailer.Prepared, error) {
	h.prepMu.Lock()
	defer h.prepMu.Unlock()
	if p, ok := h.prepared[id]; ok {
		return p, nil
	}
	p, err := h.Deliver.Render.Prepare(mailer.KindEvents, shared)
	if err != nil {
		return nil, err
	}
	if h.prepared == nil || len(h.prepared) > 16 {
		h.prepared = map[string]*mailer.Prepared{}
	}
	h.prepared[id] = p
	return p, nil
}

// fanOutPush queues the fan-out of an issue round's push notifications
// beside its mail: the planner stays the e-mail path, the fan-out walks
// the same readers for their browsers only. Its TaskID makes planning
// again (a retry, a resumed planner) queue it once per round, and its
// marks skip whoever an earlier round notified. Like the planner's other
// Redis steps it waits out an outage rather than hand the plan back.
func (h *IssueSender) fanOutPush(ctx context.Context, is store.Issue, round int) error {
	if is.Segment != 0 {
		// The push fan-out walks topics' audiences: an issue to a
		// segment goes by e-mail alone, not to the topics' browsers.
		return nil
	}
	n := webpush.IssueNotification(is.Subject, h.Links.ArchiveURL(is))
	if n.URL == "" {
		n.URL = h.Links.BaseURL
	}
	err := enqueueOnce(ctx, h.Queue, tasks.NewFanout(tasks.FanoutPayload{
		IssueID: is.ID, Round: round, Topics: is.Topics, Title: n.Title, Body: n.Body, URL: n.URL, At: h.Now().UTC(),
	}))
	if err != nil {
		return fmt.Errorf("the issue's push fan-out: %w", err)
	}
	return nil
}
