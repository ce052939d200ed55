package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// ids are the ids of a page's subscribers.
func ids(page store.SubscriberPage) []int64 {
	out := make([]int64, len(page.Subscribers))
	for i, s := range page.Subscribers {
		out[i] = s.ID
	}
	return out
}

// listAll walks every page of q, limit at a time.
func listAll(t *testing.T, s store.Store, q store.SubscriberQuery) []int64 {
	t.Helper()
	var out []int64
	for range 1000 {
		page, err := s.ListSubscribers(context.Background(), q)
		must(t, err)
		out = append(out, ids(page)...)
		if page.Next == 0 {
			return out
		}
		if page.Next != out[len(out)-1] {
			t.Fatalf("next %d is not the page's last id %d", page.Next, out[len(out)-1])
		}
		q.After = page.Next
	}
	t.Fatal("the pages never ended")
	return nil
}

// The list: pages in id order by keyset, filtered by status and topic,
// following every status change; bad queries are refused.
func testListSubscribers(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	byStatus := map[store.Status][]int64{}
	byTopic := map[string][]int64{}
	var all []int64
	for i := range 23 {
		email := fmt.Sprintf("l%02d@x.io", i)
		req := store.SubscribeRequest{Email: email, Activate: i%3 != 0}
		if i%3 == 0 {
			req.Outbox = entry("confirm:" + email)
		}
		if i%4 == 0 {
			req.Topics = []string{"updates"}
		}
		sub, err := s.Subscribe(ctx, req)
		must(t, err)
		all = append(all, sub.ID)
		switch {
		case i%7 == 1:
			must2(t)(s.Unsubscribe(ctx, email))
		case i%7 == 2:
			must(t, s.MarkBounced(ctx, email))
		case i%7 == 4 && sub.Status == store.Active:
			must2(t)(s.RecordFeedback(ctx, store.Feedback{Email: email, Type: store.Complaint}, store.FeedbackPolicy{}))
		}
		got, err := s.Get(ctx, email)
		must(t, err)
		byStatus[got.Status] = append(byStatus[got.Status], got.ID)
		for _, tp := range got.Topics {
			byTopic[tp] = append(byTopic[tp], got.ID)
		}
	}
	// The list is in id order, which is not the order of signing up:
	// an id carries its shard.
	slices.Sort(all)
	for _, ids := range byStatus {
		slices.Sort(ids)
	}
	for _, ids := range byTopic {
		slices.Sort(ids)
	}
	for _, limit := range []int{1, 4, 23, 500} {
		if got := listAll(t, s, store.SubscriberQuery{Limit: limit}); !slices.Equal(got, all) {
			t.Fatalf("all, %d a page: %v, want %v", limit, got, all)
		}
		for _, st := range store.Statuses {
			if got := listAll(t, s, store.SubscriberQuery{Status: st, Limit: limit}); !slices.Equal(got, byStatus[st]) {
				t.Fatalf("%s, %d a page: %v, want %v", st, limit, got, byStatus[st])
			}
		}
		for _, tp := range []string{"digest", "updates"} {
			if got := listAll(t, s, store.SubscriberQuery{Topic: tp, Limit: limit}); !slices.Equal(got, byTopic[tp]) {
				t.Fatalf("topic %s, %d a page: %v, want %v", tp, limit, got, byTopic[tp])
			}
			var want []int64
			for _, id := range byTopic[tp] {
				if slices.Contains(byStatus[store.Active], id) {
					want = append(want, id)
				}
			}
			if got := listAll(t, s, store.SubscriberQuery{Status: store.Active, Topic: tp, Limit: limit}); !slices.Equal(got, want) {
				t.Fatalf("active in %s, %d a page: %v, want %v", tp, limit, got, want)
			}
		}
	}
	// A page's subscribers are whole: topics and status as Get has them.
	page, err := s.ListSubscribers(ctx, store.SubscriberQuery{Limit: 3})
	must(t, err)
	for _, sub := range page.Subscribers {
		got, err := s.Get(ctx, sub.Email)
		must(t, err)
		got.Reconfirming = false
		if fmt.Sprint(got) != fmt.Sprint(sub) {
			t.Fatalf("listed %+v, stored %+v", sub, got)
		}
	}
	// A pending one confirming moves between the lists.
	pending := byStatus[store.Pending][0]
	sub, err := s.GetByID(ctx, pending)
	must(t, err)
	must2(t)(s.Confirm(ctx, sub.Email, outbox.Entry{}))
	if got := listAll(t, s, store.SubscriberQuery{Status: store.Pending, Limit: 10}); slices.Contains(got, pending) {
		t.Fatalf("confirmed %d still listed as pending: %v", pending, got)
	}
	if got := listAll(t, s, store.SubscriberQuery{Status: store.Active, Limit: 10}); !slices.Contains(got, pending) {
		t.Fatalf("confirmed %d not listed as active: %v", pending, got)
	}
	for _, q := range []store.SubscriberQuery{
		{Limit: 0}, {Limit: store.MaxSubscriberPage + 1}, {Limit: 10, After: -1},
		{Limit: 10, Status: "gone"}, {Limit: 10, Topic: "nosuch"},
	} {
		if _, err := s.ListSubscribers(ctx, q); !errors.Is(err, store.ErrBadQuery) {
			t.Fatalf("query %+v: %v, want ErrBadQuery", q, err)
		}
	}
	if page, err := s.ListSubscribers(ctx, store.SubscriberQuery{Limit: 10, After: all[len(all)-1]}); err != nil || len(page.Subscribers) != 0 || page.Next != 0 {
		t.Fatalf("after the last: %+v %v", page, err)
	}
}

// Personal data: consent, the mails sent (shared marks and one's own),
// bounces and complaints, push subscriptions.
func testPersonalData(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	if _, err := s.PersonalData(ctx, "nobody@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	before := time.Now().Add(-time.Second)
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "pd@x.io", Name: "Pat", Source: store.SourceForm, Outbox: entry("confirm:pd@x.io")})
	must(t, err)
	must2(t)(s.Confirm(ctx, "pd@x.io", outbox.Entry{}))
	other, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "other@x.io", Activate: true, Source: store.SourceImport})
	must(t, err)
	must(t, s.MarkSent(ctx,
		store.Mark{Kind: "digest", Key: "2026-W01", SubscriberID: sub.ID, Shared: true},
		store.Mark{Kind: "digest", Key: "2026-W02", SubscriberID: other.ID, Shared: true},
		store.Mark{Kind: "welcome", SubscriberID: sub.ID, Shared: true},
		store.Mark{Kind: "confirm", Key: "nonce1", SubscriberID: sub.ID},
		store.Mark{Kind: "confirm", Key: "nonce2", SubscriberID: other.ID}))
	must2(t)(s.RecordFeedback(ctx, store.Feedback{Email: "pd@x.io", Type: store.SoftBounce, ID: "r1"}, store.FeedbackPolicy{}))
	must(t, s.AddPushSubscription(ctx, sub.ID, store.PushSubscription{Endpoint: "https://push.example/1", P256DH: []byte{4, 1}, Auth: []byte{2}}))

	pd, err := s.PersonalData(ctx, "pd@x.io")
	must(t, err)
	if pd.Subscriber.ID != sub.ID || pd.Subscriber.Name != "Pat" || pd.Subscriber.Status != store.Active {
		t.Fatalf("subscriber: %+v", pd.Subscriber)
	}
	if pd.Consent.Source != store.SourceForm || pd.Consent.RequestedAt.Before(before) || pd.Consent.ConfirmedAt.IsZero() || pd.Consent.ConfirmedAt.Before(pd.Consent.RequestedAt) {
		t.Fatalf("consent: %+v", pd.Consent)
	}
	var mails []string
	for _, m := range pd.Mails {
		mails = append(mails, m.Kind+":"+m.Key)
		if (m.Kind == "confirm") == m.At.IsZero() {
			t.Fatalf("mail %+v: a person's own mail has its time, a shared one none", m)
		}
	}
	slices.Sort(mails)
	if want := []string{"confirm:nonce1", "digest:2026-W01", "welcome:"}; !slices.Equal(mails, want) {
		t.Fatalf("mails %v, want %v", mails, want)
	}
	if len(pd.Feedback) != 1 || pd.Feedback[0].Type != store.SoftBounce || pd.Feedback[0].At.Before(before) || pd.SoftBounces != 1 {
		t.Fatalf("feedback: %+v, soft %d", pd.Feedback, pd.SoftBounces)
	}
	if len(pd.Push) != 1 || pd.Push[0].Endpoint != "https://push.example/1" {
		t.Fatalf("push: %+v", pd.Push)
	}
	op, err := s.PersonalData(ctx, "other@x.io")
	must(t, err)
	if op.Consent.Source != store.SourceImport || len(op.Mails) != 2 || len(op.Feedback) != 0 || len(op.Push) != 0 {
		t.Fatalf("the other one: %+v", op)
	}
}

// Erase: everything about the person goes; an import skips the address,
// the person's own signup and confirmation bring them back.
func testErase(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	if _, err := s.Erase(ctx, "nobody@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("erase unknown: %v", err)
	}
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "er@x.io", Name: "Erin", Activate: true, Outbox: entry("welcome:er@x.io")})
	must(t, err)
	keep, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "keep@x.io", Activate: true, Outbox: entry("welcome:keep@x.io")})
	must(t, err)
	must(t, s.AddPushSubscription(ctx, sub.ID, store.PushSubscription{Endpoint: "https://push.example/e", P256DH: []byte{4}, Auth: []byte{1}}))
	gone, err := s.Erase(ctx, "er@x.io", "welcome:er@x.io")
	if err != nil || gone.ID != sub.ID || gone.Email != "er@x.io" {
		t.Fatalf("erase: %+v %v", gone, err)
	}
	if _, err := s.Get(ctx, "er@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after erase: %v", err)
	}
	if _, err := s.GetByID(ctx, sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get by id after erase: %v", err)
	}
	if _, err := s.PersonalData(ctx, "er@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("personal data after erase: %v", err)
	}
	if push, err := s.PushSubscriptions(ctx, sub.ID); err != nil || len(push) != 0 {
		t.Fatalf("push after erase: %v %v", push, err)
	}
	if outboxHas(t, s, "welcome:er@x.io") || !outboxHas(t, s, "welcome:keep@x.io") {
		t.Fatal("erase must drop the person's outbox entries and only theirs")
	}
	if got := listAll(t, s, store.SubscriberQuery{Limit: 10}); !slices.Equal(got, []int64{keep.ID}) {
		t.Fatalf("list after erase: %v", got)
	}
	if got := listAll(t, s, store.SubscriberQuery{Status: store.Active, Topic: "digest", Limit: 10}); !slices.Equal(got, []int64{keep.ID}) {
		t.Fatalf("active digest list after erase: %v", got)
	}
	if _, err := s.Erase(ctx, "er@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("erase twice: %v", err)
	}
	// An import does not bring the person back, pending or active.
	for _, activate := range []bool{true, false} {
		req := store.SubscribeRequest{Email: "er@x.io", Activate: activate, OnlyNew: true, Source: store.SourceImport}
		if !activate {
			req.Outbox = entry("confirm:er@x.io")
		}
		if _, err := s.Subscribe(ctx, req); !errors.Is(err, store.ErrErased) {
			t.Fatalf("import (activate %v) after erase: %v, want ErrErased", activate, err)
		}
		if _, err := s.Get(ctx, "er@x.io"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the import brought the erased address back: %v", err)
		}
	}
	// Their own signup does: a new subscriber, and the confirmation
	// forgets the erasure.
	again, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "er@x.io", Outbox: entry("confirm:er@x.io"), Source: store.SourceForm})
	if err != nil || again.ID == sub.ID || again.Status != store.Pending || again.Name != "" {
		t.Fatalf("signup after erase: %+v %v", again, err)
	}
	must2(t)(s.Confirm(ctx, "er@x.io", outbox.Entry{}))
	must2(t)(s.Erase(ctx, "er@x.io"))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "er@x.io", Outbox: entry("confirm:er@x.io")}))
	must2(t)(s.Confirm(ctx, "er@x.io", outbox.Entry{}))
	must2(t)(s.Unsubscribe(ctx, "er@x.io"))
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "er@x.io", Activate: true, OnlyNew: true}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("import of a returned person: %v, want ErrExists", err)
	}
	// Erased again: the import skips the address again.
	must2(t)(s.Erase(ctx, "er@x.io"))
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "er@x.io", Activate: true, OnlyNew: true}); !errors.Is(err, store.ErrErased) {
		t.Fatalf("import after the second erase: %v", err)
	}
}

// Stats: counts by status and topic, and the day's counters.
func testStats(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, n := range []int{-1, store.MaxStatsDays + 1} {
		if _, err := s.Stats(ctx, n); !errors.Is(err, store.ErrBadQuery) {
			t.Fatalf("stats of %d days: %v", n, err)
		}
	}
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s1@x.io", Outbox: entry("confirm:s1@x.io"), Source: store.SourceForm}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s2@x.io", Outbox: entry("confirm:s2@x.io"), Topics: []string{"updates"}}))
	must2(t)(s.Confirm(ctx, "s2@x.io", outbox.Entry{}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s3@x.io", Activate: true, OnlyNew: true, Source: store.SourceImport}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s4@x.io", Activate: true, OnlyNew: true, Source: store.SourceImport}))
	must2(t)(s.Unsubscribe(ctx, "s4@x.io"))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s5@x.io", Activate: true}))
	must2(t)(s.RecordFeedback(ctx, store.Feedback{Email: "s5@x.io", Type: store.HardBounce}, store.FeedbackPolicy{}))
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "s6@x.io", Activate: true}))
	must2(t)(s.Erase(ctx, "s6@x.io"))
	st, err := s.Stats(ctx, 3)
	must(t, err)
	want := map[store.Status]int64{store.Pending: 1, store.Active: 2, store.Unsubscribed: 1, store.Bounced: 1, store.Complained: 0}
	if fmt.Sprint(st.ByStatus) != fmt.Sprint(want) {
		t.Fatalf("by status %v, want %v", st.ByStatus, want)
	}
	wantTopics := []store.TopicCount{{Topic: "digest", Subscribers: 2, Active: 1}, {Topic: "updates", Subscribers: 3, Active: 2}}
	if !slices.Equal(st.ByTopic, wantTopics) {
		t.Fatalf("by topic %+v, want %+v", st.ByTopic, wantTopics)
	}
	if len(st.Days) != 3 {
		t.Fatalf("%d days, want 3", len(st.Days))
	}
	today := st.Days[2]
	if today.Day != time.Now().UTC().Format(time.DateOnly) && today.Day != time.Now().UTC().Add(-time.Minute).Format(time.DateOnly) {
		t.Fatalf("the last day is %s, not today", today.Day)
	}
	wantToday := store.DayCount{Day: today.Day, Signups: 4, Imports: 2, Confirmations: 3, Unsubscribes: 1, Bounces: 1, Erasures: 1}
	if today != wantToday {
		t.Fatalf("today %+v, want %+v", today, wantToday)
	}
	if st.Days[0].Day >= st.Days[1].Day || st.Days[1].Day >= today.Day {
		t.Fatalf("days out of order: %+v", st.Days)
	}
}
