package listjobs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The bulk actions.
const (
	ActionAddTopic    = "add_topic"
	ActionRemoveTopic = "remove_topic"
	ActionUnsubscribe = "unsubscribe"
	ActionErase       = "erase"
	// The tag actions take a tag where the topic actions take a topic
	// (the bulk input's "tag"; a job keeps it as its Topic).
	ActionAddTag    = "add_tag"
	ActionRemoveTag = "remove_tag"
)

// Actions are every bulk action, in the order the console offers them.
var Actions = []string{ActionAddTopic, ActionRemoveTopic, ActionAddTag, ActionRemoveTag, ActionUnsubscribe, ActionErase}

// ErrBadAction: an unknown action, or a topic action without a known topic.
var ErrBadAction = errors.New("bad bulk action")

// TaskDeleter deletes a queued task (*asynq.Inspector).
type TaskDeleter interface {
	DeleteTask(queue, id string) error
}

// ActionStore is what the actions change.
type ActionStore interface {
	Unsubscribe(ctx context.Context, email string, cancel ...string) (store.Subscriber, error)
	Erase(ctx context.Context, email string, outbox ...string) (store.Subscriber, error)
	ChangeSubscriber(ctx context.Context, email string, c store.Change) (store.Subscriber, error)
	AddTags(ctx context.Context, id int64, tags []string) ([]string, error)
	RemoveTags(ctx context.Context, id int64, tags []string) ([]string, error)
}

// TagAction tells whether action takes a tag rather than a topic.
func TagAction(action string) bool { return action == ActionAddTag || action == ActionRemoveTag }

// Applier applies one bulk action to one person, as the single actions
// of the API do: unsubscribing drops the mails still waiting for them,
// erasing deletes their queued tasks too (their payloads hold the
// address).
type Applier struct {
	Store  ActionStore
	Topics topics.Source
	// Tasks deletes the queued tasks of people who left or were erased
	// (nil: their handlers' re-check skips them).
	Tasks TaskDeleter
	// Channels erase what the channels added through the seam keep of
	// a person (the inbox's messages), before the store forgets them, as
	// one person's erasure does (subscribers.Service.Erase).
	Channels []ChannelEraser
}

// ChannelEraser forgets what one channel keeps of a person.
type ChannelEraser interface {
	Erase(ctx context.Context, id int64, email string) error
}

// Check tells whether action (and its topic) can run.
func (a *Applier) Check(action, topic string) error {
	switch action {
	case ActionUnsubscribe, ActionErase:
		return nil
	case ActionAddTag, ActionRemoveTag:
		if err := store.CheckTag(topic); err != nil {
			return fmt.Errorf("%w: %s needs a tag: %v", ErrBadAction, action, err)
		}
		return nil
	case ActionAddTopic, ActionRemoveTopic:
		if _, ok := topics.Of(a.Topics).Topic(topic); !ok {
			return fmt.Errorf("%w: %s needs a topic, one of %v", ErrBadAction, action, topics.Of(a.Topics).IDs())
		}
		return nil
	}
	return fmt.Errorf("%w: unknown action %q (want one of %v)", ErrBadAction, action, Actions)
}

// Apply runs action on sub: changed tells whether it changed anything
// (a person already without the topic, or already gone, is left as is).
// Running it twice changes nothing the second time, so a retried page
// is safe.
func (a *Applier) Apply(ctx context.Context, action, topic string, sub store.Subscriber) (changed bool, err error) {
	email, seq := sub.Email, topics.Of(a.Topics).Sequence
	running := sub.Status == store.Active || sub.Status == store.Pending
	switch action {
	case ActionUnsubscribe:
		if !running {
			return false, nil
		}
		pending := tasks.PendingMails(email, seq)
		_, err = a.Store.Unsubscribe(ctx, email, ids(pending)...)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		a.delete(pending)
		return err == nil, err
	case ActionErase:
		// The channels first: one that fails leaves the person whole,
		// and the page is run again.
		for _, c := range a.Channels {
			if err := c.Erase(ctx, sub.ID, email); err != nil {
				return false, fmt.Errorf("erase what a channel keeps: %w", err)
			}
		}
		pending := tasks.PersonTasks(email, seq)
		_, err = a.Store.Erase(ctx, email, ids(pending)...)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		a.delete(pending)
		return err == nil, err
	case ActionAddTag, ActionRemoveTag:
		// Any status: a tag describes the person, not the subscription.
		has := slices.Contains(sub.Tags, topic)
		switch {
		case action == ActionAddTag && has, action == ActionRemoveTag && !has:
			return false, nil
		case action == ActionAddTag:
			_, err = a.Store.AddTags(ctx, sub.ID, []string{topic})
		default:
			_, err = a.Store.RemoveTags(ctx, sub.ID, []string{topic})
		}
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	case ActionAddTopic, ActionRemoveTopic:
		has := slices.Contains(sub.Topics, topic)
		want := sub.Topics
		switch {
		case !running, action == ActionAddTopic && has, action == ActionRemoveTopic && !has:
			return false, nil
		case action == ActionAddTopic:
			want = append(slices.Clone(want), topic)
		default:
			want = slices.DeleteFunc(slices.Clone(want), func(t string) bool { return t == topic })
			if len(want) == 0 {
				return false, nil // their last topic: leaving is theirs (or unsubscribe's)
			}
		}
		if want, err = topics.Of(a.Topics).Check(want); err != nil {
			return false, err
		}
		_, err = a.Store.ChangeSubscriber(ctx, email, store.Change{Topics: want, Cancel: tasks.SequenceCancel(email, seq)})
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotActive) {
			return false, nil
		}
		if err == nil && topic == seq.Topic && action == ActionRemoveTopic {
			a.delete(tasks.SequenceTasks(email, seq))
		}
		return err == nil, err
	}
	return false, a.Check(action, topic)
}

func ids(refs []tasks.TaskRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.ID
	}
	return out
}

// delete deletes queued tasks; one running or gone is no error (its
// handler's re-check finds the person left).
func (a *Applier) delete(refs []tasks.TaskRef) {
	if a.Tasks == nil {
		return
	}
	for _, r := range refs {
		_ = a.Tasks.DeleteTask(r.Queue, r.ID) // not found, running: the handler re-checks
	}
}
