package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// farFuture is later than any outbox entry's due time.
var farFuture = time.Now().Add(1000 * time.Hour)

// outboxHas tells whether an outbox entry id is waiting.
func outboxHas(t *testing.T, s store.Store, id string) bool {
	t.Helper()
	due, err := s.OutboxDue(context.Background(), farFuture, 1000)
	must(t, err)
	return slices.ContainsFunc(due, func(e outbox.Entry) bool { return e.ID == id })
}

// Topics: chosen at signup (nil: the defaults), read back everywhere a
// subscriber is, changed one at a time or all at once, and none left is
// unsubscribed. The digest's audience is its topic's active subscribers.
func testTopics(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	both, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "both@x.io", Activate: true})
	must(t, err)
	if !slices.Equal(both.Topics, []string{"digest", "updates"}) {
		t.Fatalf("default topics: %v", both.Topics)
	}
	only, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "only@x.io", Activate: true, Topics: []string{"updates"}})
	must(t, err)
	if got, _ := s.Get(ctx, "only@x.io"); !slices.Equal(got.Topics, []string{"updates"}) || !slices.Equal(only.Topics, got.Topics) {
		t.Fatalf("chosen topics: answered %v, stored %v", only.Topics, got.Topics)
	}
	_, err = s.Subscribe(ctx, store.SubscribeRequest{Email: "pending@x.io", Topics: []string{"digest"}})
	must(t, err)

	audience := func(topic string) []int64 {
		t.Helper()
		ids, err := s.AudienceAfter(ctx, topic, 0, 100)
		must(t, err)
		return ids
	}
	if got := audience("digest"); !slices.Equal(got, []int64{both.ID}) {
		t.Fatalf("digest audience %v, want [%d]: not the pending one, not the updates-only one", got, both.ID)
	}
	if got := audience("updates"); !slices.Equal(got, []int64{both.ID, only.ID}) {
		t.Fatalf("updates audience %v", got)
	}
	subs, err := s.SubscribersByID(ctx, []int64{both.ID, only.ID})
	must(t, err)
	if !slices.Equal(subs[0].Topics, []string{"digest", "updates"}) || !slices.Equal(subs[1].Topics, []string{"updates"}) {
		t.Fatalf("by id: %v, %v", subs[0].Topics, subs[1].Topics)
	}
	if one, err := s.GetByID(ctx, only.ID); err != nil || !slices.Equal(one.Topics, []string{"updates"}) {
		t.Fatalf("one by id: %+v %v", one, err)
	}
	must(t, errOnly(s.AddItem(ctx, store.Item{Title: "t", URL: "https://x.io"})))
	run, _, err := s.StartDigestRun(ctx, "2030-W01")
	must(t, err)
	if run.Audience != 1 {
		t.Fatalf("run audience %d, want 1 (the digest topic's active subscribers)", run.Audience)
	}

	// Leaving the sequence's topic drops its outbox entry; the person
	// stays active with the rest.
	_, err = s.Subscribe(ctx, store.SubscribeRequest{Email: "seq@x.io", Activate: true, Outbox: entry("step:seq@x.io:welcome")})
	must(t, err)
	cancel := outbox.Cancel{Topic: "digest", Outbox: []string{"step:seq@x.io:welcome"}}
	got, err := s.LeaveTopic(ctx, "seq@x.io", "updates", cancel)
	if err != nil || got.Status != store.Active || !slices.Equal(got.Topics, []string{"digest"}) || !outboxHas(t, s, "step:seq@x.io:welcome") {
		t.Fatalf("leave updates: %+v %v", got, err)
	}
	got, err = s.SetPreferences(ctx, "seq@x.io", store.Preferences{Topics: []string{"updates"}, Name: "Seq", Timezone: "Europe/Paris"}, cancel)
	if err != nil || got.Status != store.Active || !slices.Equal(got.Topics, []string{"updates"}) || got.Name != "Seq" || got.Timezone != "Europe/Paris" || outboxHas(t, s, "step:seq@x.io:welcome") {
		t.Fatalf("set updates only: %+v %v (sequence entry left: %v)", got, err, outboxHas(t, s, "step:seq@x.io:welcome"))
	}
	// The last topic gone: unsubscribed, out of every audience.
	got, err = s.LeaveTopic(ctx, "seq@x.io", "updates", cancel)
	if err != nil || got.Status != store.Unsubscribed || len(got.Topics) != 0 || got.UnsubscribedAt.IsZero() {
		t.Fatalf("leave the last topic: %+v %v", got, err)
	}
	if slices.Contains(audience("updates"), got.ID) {
		t.Fatal("unsubscribed but still in the updates audience")
	}
	// Only an active subscription's topics change.
	for _, email := range []string{"seq@x.io", "pending@x.io"} {
		before, _ := s.Get(ctx, email)
		if _, err := s.SetPreferences(ctx, email, store.Preferences{Topics: []string{"digest"}, Name: "X"}, outbox.Cancel{}); !errors.Is(err, store.ErrNotActive) {
			t.Fatalf("%s: set topics of a %s subscription: %v", email, before.Status, err)
		}
		if after, _ := s.Get(ctx, email); !slices.Equal(after.Topics, before.Topics) || after.Status != before.Status || after.Name != before.Name {
			t.Fatalf("%s changed: %+v -> %+v", email, before, after)
		}
	}
	if _, err := s.LeaveTopic(ctx, "nobody@x.io", "digest", outbox.Cancel{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown address: %v", err)
	}
	// No topic chosen is leaving everything.
	got, err = s.SetPreferences(ctx, "both@x.io", store.Preferences{}, outbox.Cancel{})
	if err != nil || got.Status != store.Unsubscribed || len(got.Topics) != 0 {
		t.Fatalf("set no topics: %+v %v", got, err)
	}
	// Signing up again chooses again.
	got, err = s.Subscribe(ctx, store.SubscribeRequest{Email: "both@x.io", Activate: true, Topics: []string{"digest"}})
	if err != nil || !slices.Equal(got.Topics, []string{"digest"}) || !slices.Equal(audience("digest"), []int64{both.ID}) {
		t.Fatalf("re-subscribe: %+v %v", got, err)
	}
	// Unsubscribing ends every topic.
	got, err = s.Unsubscribe(ctx, "both@x.io")
	if err != nil || len(got.Topics) != 0 {
		t.Fatalf("unsubscribe: %+v %v", got, err)
	}
	if got, _ := s.Get(ctx, "both@x.io"); len(got.Topics) != 0 || got.Topics == nil {
		t.Fatalf("after unsubscribe: topics %#v, want []", got.Topics)
	}
}

// SentMarks reads progress without claiming.
func testSentMarks(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	marks := []store.Mark{
		{Kind: "welcome", SubscriberID: 3, Shared: true},
		{Kind: "getting-started", SubscriberID: 3, Shared: true},
		{Kind: "confirm", Key: "n1", SubscriberID: 3},
		{Kind: "confirm", Key: "n2", SubscriberID: 3},
	}
	must(t, s.MarkSent(ctx, marks[0], marks[2]))
	got, err := s.SentMarks(ctx, marks)
	if err != nil || !slices.Equal(got, []bool{true, false, true, false}) {
		t.Fatalf("sent %v %v", got, err)
	}
	claims, err := s.ClaimMarks(ctx, "", marks[1:2], time.Minute)
	if err != nil || claims[0] != store.Claimed {
		t.Fatalf("SentMarks must not claim: %v %v", claims, err)
	}
}

func errOnly[T any](_ T, err error) error { return err }

// SuppressedHaveNoTopics: a subscription that a bounce or complaint ended
// has no topics, as an unsubscribed one has none (the reference says an
// ended subscription has none); a soft bounce that does not end it keeps
// them. Lifting a bounce by hand makes the address active again with the
// default topics, so that it is in the audiences it had by default.
func testSuppressedHaveNoTopics(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	pol := store.FeedbackPolicy{SoftLimit: 2}
	ids := map[string]int64{}
	for _, email := range []string{"hard@x.io", "soft@x.io", "spam@x.io", "lift@x.io"} {
		sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true})
		must(t, err)
		ids[email] = sub.ID
	}
	pending, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "pending@x.io", Topics: []string{"updates"}})
	must(t, err)
	noTopics := func(what string, res store.FeedbackResult, err error, want store.Status) {
		t.Helper()
		if err != nil || res.Subscriber.Status != want || len(res.Subscriber.Topics) != 0 {
			t.Fatalf("%s: answered %+v %v, want %s with no topics", what, res.Subscriber, err, want)
		}
		got, err := s.Get(ctx, res.Subscriber.Email)
		if err != nil || got.Status != want || len(got.Topics) != 0 || got.Topics == nil {
			t.Fatalf("%s: stored %+v %v, want %s with topics []", what, got, err, want)
		}
	}
	res, err := s.RecordFeedback(ctx, store.Feedback{ID: "h1", SubscriberID: ids["hard@x.io"], Type: store.HardBounce}, pol)
	noTopics("hard bounce", res, err, store.Bounced)
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "s1", Email: "soft@x.io", Type: store.SoftBounce}, pol)
	if err != nil || res.Subscriber.Status != store.Active || !slices.Equal(res.Subscriber.Topics, []string{"digest", "updates"}) {
		t.Fatalf("one soft bounce ends nothing: %+v %v", res.Subscriber, err)
	}
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "s2", Email: "soft@x.io", Type: store.SoftBounce}, pol)
	noTopics("soft bounces at the limit", res, err, store.Bounced)
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "c1", Email: "spam@x.io", Type: store.Complaint}, pol)
	noTopics("complaint", res, err, store.Complained)
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "c2", SubscriberID: pending.ID, Type: store.Complaint}, pol)
	noTopics("complaint about a pending address", res, err, store.Complained)
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "h2", Email: "lift@x.io", Type: store.HardBounce}, pol)
	noTopics("hard bounce before a lift", res, err, store.Bounced)
	for _, topic := range []string{"digest", "updates"} {
		aud, err := s.AudienceAfter(ctx, topic, 0, 100)
		must(t, err)
		for email, id := range ids {
			if slices.Contains(aud, id) {
				t.Fatalf("%s is in the %s audience after it was suppressed", email, topic)
			}
		}
	}
	lifted, err := s.LiftSuppression(ctx, "lift@x.io")
	if err != nil || lifted.Status != store.Active || !slices.Equal(lifted.Topics, []string{"digest", "updates"}) {
		t.Fatalf("lifted bounce: %+v %v, want active with the default topics", lifted, err)
	}
	if got, _ := s.Get(ctx, "lift@x.io"); !slices.Equal(got.Topics, []string{"digest", "updates"}) {
		t.Fatalf("lifted bounce stored with topics %v", got.Topics)
	}
	aud, err := s.AudienceAfter(ctx, "digest", 0, 100)
	if err != nil || !slices.Equal(aud, []int64{ids["lift@x.io"]}) {
		t.Fatalf("digest audience after the lift: %v %v", aud, err)
	}
	unsub, err := s.LiftSuppression(ctx, "spam@x.io")
	if err != nil || unsub.Status != store.Unsubscribed || len(unsub.Topics) != 0 {
		t.Fatalf("lifted complaint: %+v %v, want unsubscribed with no topics", unsub, err)
	}
}
