package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/newsletter/newsletter/store"
)

func emails(subs []store.Subscriber) []string {
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.Email
	}
	return out
}

// searchAll walks every page of a search forwards, then backwards from
// the end, and checks that both give the same people once each.
func searchAll(t *testing.T, s store.Store, q store.SearchQuery) []string {
	t.Helper()
	ctx := context.Background()
	var fwd []string
	var last store.SearchPage
	for range 100 {
		page, err := s.Search(ctx, q)
		must(t, err)
		fwd = append(fwd, emails(page.Subscribers)...)
		last = page
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	// Backwards from the last page's start.
	var back []string
	q.After = ""
	q.Before = last.Prev
	back = append(back, emails(last.Subscribers)...)
	for q.Before != "" {
		page, err := s.Search(ctx, q)
		must(t, err)
		back = append(emails(page.Subscribers), back...)
		q.Before = page.Prev
	}
	if !slices.Equal(fwd, back) {
		t.Fatalf("forwards %v, backwards %v", fwd, back)
	}
	seen := map[string]bool{}
	for _, e := range fwd {
		if seen[e] {
			t.Fatalf("%s listed twice in %v", e, fwd)
		}
		seen[e] = true
	}
	return fwd
}

// The search index: people are found by the beginning of their address
// or of any word of their name, case aside, once each, in pages both
// ways; a change of name moves them, an erasure takes them off.
func testSearch(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	for i := range 12 {
		name := fmt.Sprintf("Anna O'Brien %d", i)
		if i%2 == 1 {
			name = "Bob \"Bobby\" Smith"
		}
		_, err := s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("anna%02d@x.io", i), Name: name, Activate: true})
		must(t, err)
	}
	_, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "zed@x.io", Name: "Anna Zed", Activate: true})
	must(t, err)

	all := searchAll(t, s, store.SearchQuery{Q: "ANN", Limit: 5})
	if len(all) != 13 {
		t.Fatalf("search ann: %d people %v", len(all), all)
	}
	if got := searchAll(t, s, store.SearchQuery{Q: "bobby", Limit: 2}); len(got) != 6 {
		t.Fatalf("search bobby (a quoted word): %v", got)
	}
	if got := searchAll(t, s, store.SearchQuery{Q: "o'brien", Limit: 50}); len(got) != 6 {
		t.Fatalf("search o'brien (a word with its quote): %v", got)
	}
	if got := searchAll(t, s, store.SearchQuery{Q: "brien", Limit: 50}); len(got) != 6 {
		t.Fatalf("search brien: %v", got)
	}
	page, err := s.Search(ctx, store.SearchQuery{Q: "zed", Limit: 10})
	must(t, err)
	// zed@x.io and the name's word "zed": two entries, one person.
	if len(page.Subscribers) != 1 || page.Total != 2 || page.Next != "" || page.Prev != "" {
		t.Fatalf("search zed: %v total %d next %q prev %q", emails(page.Subscribers), page.Total, page.Next, page.Prev)
	}
	// Narrowed by status.
	_, err = s.Unsubscribe(ctx, "anna00@x.io")
	must(t, err)
	if got := searchAll(t, s, store.SearchQuery{Q: "anna0", Status: store.Unsubscribed, Limit: 3}); !slices.Equal(got, []string{"anna00@x.io"}) {
		t.Fatalf("search anna0 unsubscribed: %v", got)
	}
	// A new name moves the person in the index.
	name := "Carla"
	if _, err := s.ChangeSubscriber(ctx, "zed@x.io", store.Change{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if got := searchAll(t, s, store.SearchQuery{Q: "carla", Limit: 3}); !slices.Equal(got, []string{"zed@x.io"}) {
		t.Fatalf("search carla after the change: %v", got)
	}
	if page, _ := s.Search(ctx, store.SearchQuery{Q: "anna z", Limit: 3}); len(page.Subscribers) != 0 || page.Total != 0 {
		t.Fatalf("the old name is still found: %v", emails(page.Subscribers))
	}
	// Erased: no entry left.
	if _, err := s.Erase(ctx, "zed@x.io"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"zed", "carla"} {
		if page, _ := s.Search(ctx, store.SearchQuery{Q: q, Limit: 3}); page.Total != 0 || len(page.Subscribers) != 0 {
			t.Fatalf("search %s after the erasure: %v total %d", q, emails(page.Subscribers), page.Total)
		}
	}
	for _, bad := range []store.SearchQuery{{Q: " ", Limit: 3}, {Q: "a", Limit: 0}, {Q: "a", After: "b\x001", Limit: 3}, {Q: "a", Topic: "nope", Limit: 3}} {
		if _, err := s.Search(ctx, bad); !errors.Is(err, store.ErrBadQuery) {
			t.Fatalf("search %+v: %v", bad, err)
		}
	}
}

// The list's pages go both ways and carry the total.
func testListBothWays(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	var want []int64
	for i := range 17 {
		sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("b%02d@x.io", i), Activate: true})
		must(t, err)
		want = append(want, sub.ID)
	}
	slices.Sort(want)
	q := store.SubscriberQuery{Status: store.Active, Limit: 5}
	var fwd []int64
	var last store.SubscriberPage
	for {
		page, err := s.ListSubscribers(ctx, q)
		must(t, err)
		if page.Total != 17 {
			t.Fatalf("total %d, want 17", page.Total)
		}
		fwd = append(fwd, ids(page)...)
		last = page
		if page.Next == 0 {
			break
		}
		q.After = page.Next
	}
	if !slices.Equal(fwd, want) {
		t.Fatalf("forwards %v, want %v", fwd, want)
	}
	back := ids(last)
	q = store.SubscriberQuery{Status: store.Active, Limit: 5, Before: last.Prev}
	for q.Before != 0 {
		page, err := s.ListSubscribers(ctx, q)
		must(t, err)
		back = append(ids(page), back...)
		q.Before = page.Prev
	}
	if !slices.Equal(back, want) {
		t.Fatalf("backwards %v, want %v", back, want)
	}
	if n, err := s.CountSelection(ctx, store.Filter{Topic: "updates", Status: store.Active}); err != nil || n != 17 {
		t.Fatalf("count active with updates: %d %v", n, err)
	}
	if _, err := s.ListSubscribers(ctx, store.SubscriberQuery{After: 1, Before: 2, Limit: 3}); !errors.Is(err, store.ErrBadQuery) {
		t.Fatalf("after and before: %v", err)
	}
}

// An admin's addition without double opt-in keeps its reason and actor
// in the consent record; a change sets what it gives, and topics only of
// a running subscription.
func testAdminAddAndChange(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "hand@x.io", Activate: true, OnlyNew: true,
		Source: store.SourceAdmin, Reason: "asked at the fair", Actor: "alice"})
	must(t, err)
	pd, err := s.PersonalData(ctx, "hand@x.io")
	must(t, err)
	if pd.Consent.Source != store.SourceAdmin || pd.Consent.Reason != "asked at the fair" || pd.Consent.Actor != "alice" || pd.Consent.RequestedAt.IsZero() {
		t.Fatalf("consent %+v", pd.Consent)
	}
	cs, err := s.ConsentsOf(ctx, []int64{sub.ID, 999999})
	must(t, err)
	if c := cs[0]; c.Source != store.SourceAdmin || c.Reason != pd.Consent.Reason || c.Actor != "alice" || !c.RequestedAt.Equal(pd.Consent.RequestedAt) || cs[1].Source != "" {
		t.Fatalf("consents of %v", cs)
	}
	tz, name := "Europe/Berlin", `Ann "the hand" Lee`
	got, err := s.ChangeSubscriber(ctx, "hand@x.io", store.Change{Name: &name, Timezone: &tz, Topics: []string{"updates"}})
	must(t, err)
	if got.Name != name || got.Timezone != tz || !slices.Equal(got.Topics, []string{"updates"}) {
		t.Fatalf("changed: %+v", got)
	}
	// Only the time zone: the rest stays.
	tz = "UTC"
	got, err = s.ChangeSubscriber(ctx, "hand@x.io", store.Change{Timezone: &tz})
	must(t, err)
	if got.Name != name || got.Timezone != "UTC" || !slices.Equal(got.Topics, []string{"updates"}) {
		t.Fatalf("changed the time zone only: %+v", got)
	}
	_, err = s.Unsubscribe(ctx, "hand@x.io")
	must(t, err)
	if _, err := s.ChangeSubscriber(ctx, "hand@x.io", store.Change{Topics: []string{"digest"}}); !errors.Is(err, store.ErrNotActive) {
		t.Fatalf("topics of an ended subscription: %v", err)
	}
	if _, err := s.ChangeSubscriber(ctx, "nobody@x.io", store.Change{Name: &name}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("change nobody: %v", err)
	}
}

// Select walks a filter's selection page by page to its end.
func testSelect(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	for i := range 9 {
		_, err := s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("sel%d@x.io", i), Name: "Sel", Activate: i%3 != 0})
		must(t, err)
	}
	for _, f := range []store.Filter{{Status: store.Active}, {Q: "sel", Status: store.Active}} {
		var got []string
		cursor := ""
		for range 20 {
			subs, next, err := s.Select(ctx, f, cursor, 2)
			must(t, err)
			got = append(got, emails(subs)...)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(got) != 6 {
			t.Fatalf("select %+v: %v", f, got)
		}
	}
	if n, err := s.CountSelection(ctx, store.Filter{Q: "sel"}); err != nil || n != 9*2 {
		// Each is found by the address and by the name.
		t.Fatalf("count sel: %d %v", n, err)
	}
}
