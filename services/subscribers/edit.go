package subscribers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// ChangeSubscriber sets what in gives of the person with address email,
// everything checked first; the name, time zone and topics change in one
// step of the store, then the tags and the fields, each in a step of its
// own. It is audited.
func (s *Service) ChangeSubscriber(ctx context.Context, email string, in ChangeInput) (store.Subscriber, error) {
	tags, fields, err := s.checkExtras(ctx, in.Tags, in.Fields)
	if err != nil {
		return store.Subscriber{}, err
	}
	c, what, core, err := s.changeOf(email, in)
	if err != nil {
		return store.Subscriber{}, err
	}
	before, err := s.Store.Get(ctx, email)
	if err != nil {
		return before, err
	}
	sub := before
	if len(what) > core {
		sub, err = s.Store.ChangeSubscriber(ctx, email, c)
		if errors.Is(err, store.ErrNotActive) {
			return sub, &ListError{Code: http.StatusConflict, Msg: fmt.Sprintf("the subscription is %s: topics change only while it runs", sub.Status)}
		}
		if err != nil {
			return sub, err
		}
	}
	if in.Tags != nil {
		if err := s.replaceTags(ctx, before, tags); err != nil {
			return sub, err
		}
		sub.Tags = slices.Sorted(slices.Values(tags)) // as the store keeps them
	}
	if in.Fields != nil {
		if sub.Fields, err = s.Store.SetFields(ctx, before.ID, fields); err != nil {
			return sub, err
		}
	}
	seq := s.topics().Sequence
	if c.Topics != nil && strings.Contains(","+strings.Join(before.Topics, ",")+",", ","+seq.Topic+",") && !strings.Contains(","+strings.Join(sub.Topics, ",")+",", ","+seq.Topic+",") {
		s.DeleteTasks(tasks.SequenceTasks(email, seq))
	}
	s.noteSubscriber(ctx, audit.SubscriberChanged, email, "by hand: "+strings.Join(what, ", "))
	return sub, nil
}

// changeOf checks in's name, time zone and topics into the store's
// change, and names what changes (what); the first core of what are the
// tags and fields, changed in steps of their own.
func (s *Service) changeOf(email string, in ChangeInput) (c store.Change, what []string, core int, err error) {
	if in.Tags != nil {
		what = append(what, "tags")
	}
	if in.Fields != nil {
		what = append(what, "fields")
	}
	core = len(what)
	if in.Name != nil {
		name, err := address.CheckName(*in.Name)
		if err != nil {
			return c, nil, 0, bad("name: %v", err)
		}
		c.Name, what = &name, append(what, "name")
	}
	if in.Timezone != nil {
		tz, err := checkTimezone(*in.Timezone)
		if err != nil {
			return c, nil, 0, err
		}
		c.Timezone, what = &tz, append(what, "time zone")
	}
	if in.Topics != nil {
		chosen, err := s.topics().Check(*in.Topics)
		if err != nil {
			return c, nil, 0, bad("topics: %v", err)
		}
		if len(chosen) == 0 {
			return c, nil, 0, bad("topics: at least one (unsubscribe ends a subscription)")
		}
		c.Topics, what = chosen, append(what, "topics")
		c.Cancel = tasks.SequenceCancel(email, s.topics().Sequence)
	}
	if len(what) == 0 {
		return c, nil, 0, bad("nothing to change: give name, timezone, topics, tags or fields")
	}
	return c, what, core, nil
}

// replaceTags makes before's tags be tags: those missing are added, the
// others removed, each in a step of the store.
func (s *Service) replaceTags(ctx context.Context, before store.Subscriber, tags []string) error {
	add := slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return slices.Contains(before.Tags, t) })
	remove := slices.DeleteFunc(slices.Clone(before.Tags), func(t string) bool { return slices.Contains(tags, t) })
	if len(add) > 0 {
		if _, err := s.Store.AddTags(ctx, before.ID, add); err != nil {
			return err
		}
	}
	if len(remove) > 0 {
		if _, err := s.Store.RemoveTags(ctx, before.ID, remove); err != nil {
			return err
		}
	}
	return nil
}
