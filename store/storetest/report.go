package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// Growth: each subscription that becomes active counts once for each of
// its topics, under its consent's source, on the day it did.
func testGrowth(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, n := range []int{-1, store.MaxStatsDays + 1} {
		if _, err := s.Growth(ctx, n); !errors.Is(err, store.ErrBadQuery) {
			t.Fatalf("growth of %d days: %v", n, err)
		}
	}
	// The form: counted when confirmed, not when signed up.
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "f1@x.io", Outbox: entry("confirm:f1@x.io"), Topics: []string{"updates"}, Source: store.SourceForm}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "f2@x.io", Outbox: entry("confirm:f2@x.io"), Topics: []string{"updates"}, Source: store.SourceForm}))
	must2(t)(s.Confirm(ctx, "f1@x.io", outbox.Entry{}))
	// An import activated at once, and one asked to confirm.
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "i1@x.io", Activate: true, OnlyNew: true, Topics: []string{"digest"}, Source: store.SourceImport}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "i2@x.io", OnlyNew: true, Outbox: entry("confirm:i2@x.io"), Topics: []string{"updates"}, Source: store.SourceImport}))
	must2(t)(s.Confirm(ctx, "i2@x.io", outbox.Entry{}))
	// The API, two topics; one of unknown source.
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "a1@x.io", Activate: true, Topics: []string{"digest", "updates"}, Source: store.SourceAPI}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "o1@x.io", Activate: true, Topics: []string{"digest"}}))
	// Already active: nothing more.
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "a1@x.io", Activate: true, Topics: []string{"digest"}, Source: store.SourceAPI}); !errors.Is(err, store.ErrAlreadyActive) {
		t.Fatalf("a second subscribe of an active address: %v", err)
	}
	all, err := s.Growth(ctx, 2)
	must(t, err)
	want := map[string]store.GrowthDay{
		"digest":  {Import: 1, API: 1, Other: 1},
		"updates": {Form: 1, Import: 1, API: 1},
	}
	if len(all) != 2 {
		t.Fatalf("growth of %d topics: %+v", len(all), all)
	}
	for topic, w := range want {
		g, ok := store.TopicGrowthOf(all, topic)
		if !ok || len(g.Days) != 2 {
			t.Fatalf("%s: %+v %v", topic, g, ok)
		}
		today := g.Days[1]
		w.Day = today.Day
		if today != w || g.Total != (store.GrowthDay{Form: w.Form, Import: w.Import, API: w.API, Other: w.Other}) || g.Days[0].Day >= today.Day {
			t.Errorf("%s: today %+v, total %+v, want %+v", topic, today, g.Total, w)
		}
	}
	// The overview's one read gives the same.
	st, both, err := s.StatsAndGrowth(ctx, 2)
	must(t, err)
	if fmt.Sprint(both) != fmt.Sprint(all) || len(st.Days) != 2 || st.Days[1].Confirmations == 0 {
		t.Fatalf("StatsAndGrowth: %+v %+v, Growth: %+v", st.Days, both, all)
	}
	if _, ok := store.TopicGrowthOf(all, "nope"); ok {
		t.Error("a topic that is not one has a growth")
	}
}

// IssueUnsubscribes: leaving through an issue's link counts for that
// issue once per person, in the same step as the change; leaving by
// another way, or a link used again, counts nothing.
func testIssueUnsubscribes(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	both := []string{"digest", "updates"}
	for _, e := range []string{"u1@x.io", "u3@x.io", "u5@x.io", "u6@x.io"} {
		must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, Topics: both}))
	}
	for _, e := range []string{"u2@x.io", "u4@x.io"} {
		must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, Topics: []string{"digest"}}))
	}
	count := func(issue int64) int64 {
		t.Helper()
		n, err := s.IssueUnsubscribes(ctx, issue)
		must(t, err)
		return n
	}
	// Everything, twice: once.
	sub, err := s.UnsubscribeFrom(ctx, "u1@x.io", 7)
	if err != nil || sub.Status != store.Unsubscribed || !sub.Ended {
		t.Fatalf("unsubscribe from issue 7: %+v %v", sub, err)
	}
	must2(t)(s.UnsubscribeFrom(ctx, "u1@x.io", 7))
	// The last topic (ends it), and one topic of two.
	must2(t)(s.LeaveTopicFrom(ctx, "u2@x.io", "digest", 7, outbox.Cancel{}))
	must2(t)(s.LeaveTopicFrom(ctx, "u3@x.io", "updates", 7, outbox.Cancel{}))
	if n := count(7); n != 3 {
		t.Fatalf("issue 7 after three leavings (one twice): %d", n)
	}
	// A topic the person does not have: nothing left, nothing counted.
	must2(t)(s.LeaveTopicFrom(ctx, "u4@x.io", "updates", 7, outbox.Cancel{}))
	// Left by another way first: the issue's link then changes nothing.
	must2(t)(s.Unsubscribe(ctx, "u5@x.io"))
	must2(t)(s.UnsubscribeFrom(ctx, "u5@x.io", 8))
	// The preference centre: a change that keeps a topic is no leaving;
	// one that leaves none is.
	must2(t)(s.SetPreferences(ctx, "u6@x.io", store.Preferences{Topics: []string{"updates"}, FromIssue: 7}, outbox.Cancel{}))
	if n := count(7); n != 3 {
		t.Fatalf("issue 7 after changes that left nothing: %d", n)
	}
	sub, err = s.SetPreferences(ctx, "u6@x.io", store.Preferences{Topics: nil, FromIssue: 7}, outbox.Cancel{})
	if err != nil || sub.Status != store.Unsubscribed {
		t.Fatalf("preferences with no topic: %+v %v", sub, err)
	}
	if n, m := count(7), count(8); n != 4 || m != 0 {
		t.Fatalf("issue 7: %d (want 4), issue 8: %d (want 0)", n, m)
	}
	st, err := s.Stats(ctx, 1)
	must(t, err)
	if got := st.Days[0].Unsubscribes; got != 4 {
		t.Fatalf("the day's unsubscribes: %d, want 4 (u1, u2, u5, u6)", got)
	}
}
