package subscribers

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// SetTopics replaces an active subscriber's topics (ids checked against
// the topics in effect here), keeping their name and time zone, with
// everything the preference centre's save does (the onboarding
// sequence's steps, the webhook when no topic is left): for the console,
// so an admin's change is the person's own change. Errors:
// store.ErrNotFound, store.ErrNotActive, a *TopicsError (the caller's
// mistake, nothing changed), or the store's.
func (s *Service) SetTopics(ctx context.Context, email string, topicIDs []string) (store.Subscriber, error) {
	chosen, err := s.topics().Check(topicIDs)
	if err != nil {
		return store.Subscriber{}, &TopicsError{Err: err}
	}
	before, err := s.Store.Get(ctx, email)
	if err != nil {
		return before, err
	}
	if before.Status != store.Active {
		return before, store.ErrNotActive
	}
	return s.SetPreferences(ctx, before, store.Preferences{Topics: chosen, Name: before.Name, Timezone: before.Timezone})
}

// SetPreferences stores p for before (an active subscriber, as read
// just now) and does what the change calls for: the onboarding
// sequence's waiting steps go when its topic is turned off and carry on
// when it is turned back on within the sequence, and a subscription left
// with no topic is notified as ended.
func (s *Service) SetPreferences(ctx context.Context, before store.Subscriber, p store.Preferences) (store.Subscriber, error) {
	email := before.Email
	seq := s.topics().Sequence
	sub, err := s.Store.SetPreferences(ctx, email, p, tasks.SequenceCancel(email, seq))
	if err != nil {
		return sub, err
	}
	had, has := slices.Contains(before.Topics, seq.Topic), slices.Contains(sub.Topics, seq.Topic)
	switch {
	case had && !has:
		s.DeleteTasks(tasks.SequenceTasks(email, seq))
	case !had && has && s.now().Before(sub.ConfirmedAt.Add(seq.Steps[len(seq.Steps)-1].After)):
		// Back on within the sequence's length: it goes on where the
		// person is (the first step's task works out which step is next).
		job := tasks.NewWelcomeAt(email, s.now())
		if _, err := s.Queue.EnqueueContext(ctx, job.Task, job.Options()...); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			s.log().Warn("preferences: resume the sequence", "err", err)
		}
	}
	if sub.Status != store.Active {
		s.NotifyLeft(ctx, sub)
	}
	return sub, nil
}

// EndSubscription ends email's subscription as an unsubscribe does: the
// waiting welcome and confirmation are dropped with it, and the webhook
// told. An address not on the list is no error.
func (s *Service) EndSubscription(ctx context.Context, email string) error {
	return s.EndFrom(ctx, email, 0)
}

// EndFrom is EndSubscription through a link of issue's mail (0: none):
// the store counts the subscription it ends in that issue's report, in
// the same step. The subscription is marked inactive first (the
// handlers' re-check stops anything already queued), then the waiting
// welcome and confirmation are deleted.
func (s *Service) EndFrom(ctx context.Context, email string, issue int64) error {
	pending := tasks.PendingMails(email, s.topics().Sequence)
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.ID
	}
	sub, err := s.Store.UnsubscribeFrom(ctx, email, issue, ids...)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err == nil {
		s.NotifyLeft(ctx, sub)
	}
	// The same work for a stranger as for a subscriber, so neither the
	// answer nor its time tells who is on the list.
	s.DeleteTasks(pending)
	return nil
}

// NotifyLeft queues subscriber.unsubscribed when the store call that
// returned sub ended its subscription (sub.Ended, the store's own word):
// not for an address that never confirmed (no system of the admin's
// knows it, and anyone can type it), nor for one that had left before (an
// unsubscribe link used again is no news).
func (s *Service) NotifyLeft(ctx context.Context, sub store.Subscriber) {
	if sub.Status != store.Unsubscribed || sub.ConfirmedAt.IsZero() || !sub.Ended {
		return
	}
	s.Notify.NotifyLogged(ctx, webhooks.SubscriberEvent(tasks.WebhookSubscriberUnsubscribed, sub, ""))
}

// Export gathers everything held about the person with address email
// (GDPR Art. 15), stamped with the time of the export: the API's, the
// preference centre's and the console's export. store.ErrNotFound when
// there is nobody.
func (s *Service) Export(ctx context.Context, email string) (PersonalExport, error) {
	pd, err := s.Store.PersonalData(ctx, email)
	if err != nil {
		return PersonalExport{}, err
	}
	out := ExportOf(pd, s.now())
	if out.ChannelData, err = s.ChannelData(ctx, pd.Subscriber.ID, pd.Subscriber.Email); err != nil {
		return PersonalExport{}, err
	}
	return out, nil
}

// ChannelData is what the channels added through the seam keep of the
// person (the inbox's messages), by channel; nil when none keeps
// anything. The export carries it, and the console's page of the person
// shows it.
func (s *Service) ChannelData(ctx context.Context, id int64, email string) (map[string]any, error) {
	var out map[string]any
	for _, c := range s.Channels {
		v, err := c.Export(ctx, id, email)
		if err != nil {
			return nil, fmt.Errorf("export from channel %s: %w", c.Name(), err)
		}
		if v != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[c.Name()] = v
		}
	}
	return out, nil
}

// Erase forgets email in the store (GDPR Art. 17), with the outbox
// entries of the mails still waiting for them, then deletes those tasks
// from the queue (their payloads hold the address): the API's, the
// preference centre's and the console's erase. A task already running
// finds no subscriber at its re-check and sends nothing.
// store.ErrNotFound when there is nobody.
func (s *Service) Erase(ctx context.Context, email string) error {
	if err := s.eraseChannels(ctx, email); err != nil {
		return err
	}
	pending := tasks.PersonTasks(email, s.topics().Sequence)
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.ID
	}
	sub, err := s.Store.Erase(ctx, email, ids...)
	if err != nil {
		return err
	}
	s.DeleteTasks(pending)
	s.log().Info("erase: subscriber erased", "subscriber", sub.ID)
	return nil
}

// eraseChannels erases what the channels added through the seam keep of
// email's person, before the store forgets them: a channel that fails
// leaves the person whole, to be erased again.
func (s *Service) eraseChannels(ctx context.Context, email string) error {
	if len(s.Channels) == 0 {
		return nil
	}
	sub, err := s.Store.Get(ctx, email)
	if err != nil {
		return err
	}
	for _, c := range s.Channels {
		if err := c.Erase(ctx, sub.ID, sub.Email); err != nil {
			return fmt.Errorf("erase from channel %s: %w", c.Name(), err)
		}
	}
	return nil
}
