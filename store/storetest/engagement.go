package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// Engagement: the counts of several flushes add up, a reader counted
// again (in a later flush, on another link) stays one unique reader, the
// link targets come back by index, the hours are in order, and an issue
// nobody clicked is a zero Engagement.
func testEngagement(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	if e, err := s.IssueEngagement(ctx, 99); err != nil || e.Clicks != 0 || len(e.Links) != 0 || len(e.Hours) != 0 {
		t.Fatalf("an issue nobody clicked: %+v, %v", e, err)
	}
	must(t, s.SetIssueLinks(ctx, 7, []string{"https://a.example/1", "https://b.example/2"}))
	if urls, err := s.IssueLinks(ctx, 7); err != nil || len(urls) != 2 || urls[1] != "https://b.example/2" {
		t.Fatalf("links: %v, %v", urls, err)
	}
	hour := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).Unix() / 3600
	first := store.EngagementBatch{Issue: 7,
		Links: map[int]*store.LinkCounts{
			0: {Clicks: 2, Readers: []string{"ra"}},
			1: {Clicks: 1, MachineClicks: 3, Readers: []string{"rb"}},
		},
		Opens: 2, MachineOpens: 1, Openers: []string{"ra", "rb"},
		Hours: map[int64]*store.HourCount{hour + 1: {Clicks: 1, MachineClicks: 3}, hour: {Clicks: 2, Opens: 2, MachineOpens: 1}},
	}
	second := store.EngagementBatch{Issue: 7,
		Links: map[int]*store.LinkCounts{0: {Clicks: 1, Readers: []string{"ra"}}, 1: {Clicks: 1, Readers: []string{"ra"}}},
		Hours: map[int64]*store.HourCount{hour + 1: {Clicks: 2}},
		Tens:  map[int64]*store.HourCount{hour * 6: {Clicks: 2}, hour*6 + 1: {Opens: 1}},
	}
	for _, b := range []store.EngagementBatch{first, second} {
		left, err := s.RecordEngagement(ctx, store.EngagementWrite{Batches: []store.EngagementBatch{b}})
		must(t, err)
		if !left.Empty() {
			t.Fatalf("left unwritten: %+v", left)
		}
	}
	e, err := s.IssueEngagement(ctx, 7)
	must(t, err)
	if e.Clicks != 5 || e.MachineClicks != 3 || e.UniqueClickers != 2 || e.Opens != 2 || e.MachineOpens != 1 || e.UniqueOpeners != 2 {
		t.Fatalf("totals: %+v", e)
	}
	want := []store.LinkStat{
		{Index: 0, URL: "https://a.example/1", Clicks: 3, UniqueClickers: 1},
		{Index: 1, URL: "https://b.example/2", Clicks: 2, UniqueClickers: 2, MachineClicks: 3},
	}
	if len(e.Links) != 2 || e.Links[0] != want[0] || e.Links[1] != want[1] {
		t.Fatalf("links: %+v, want %+v", e.Links, want)
	}
	if len(e.Hours) != 2 || !e.Hours[0].Hour.Equal(time.Unix(hour*3600, 0)) || e.Hours[0].Clicks != 2 || e.Hours[0].Opens != 2 ||
		e.Hours[1].Clicks != 3 || e.Hours[1].MachineClicks != 3 {
		t.Fatalf("hours: %+v", e.Hours)
	}
	// The finer buckets are read apart, not added to the hours.
	if len(e.Tens) != 2 || !e.Tens[0].Hour.Equal(time.Unix(hour*3600, 0)) || e.Tens[0].Clicks != 2 ||
		!e.Tens[1].Hour.Equal(time.Unix(hour*3600+600, 0)) || e.Tens[1].Opens != 1 {
		t.Fatalf("ten-minute buckets: %+v", e.Tens)
	}
}

// EngagementPerPerson: a person's clicks are in their personal data,
// the older than kept are dropped, and an erasure takes them.
func testEngagementPerPerson(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "clicker@x.io", Activate: true})
	must(t, err)
	now := time.Now()
	w := store.EngagementWrite{Keep: 90 * 24 * time.Hour, Clicks: []store.PersonClick{
		{Subscriber: sub.ID, Issue: 3, Link: 1, At: now.Add(-time.Hour)},
		{Subscriber: sub.ID, Issue: 3, Link: 1, At: now},
		{Subscriber: sub.ID, Issue: 2, Link: 0, At: now.Add(-100 * 24 * time.Hour)},
	}}
	if left, err := s.RecordEngagement(ctx, w); err != nil || !left.Empty() {
		t.Fatalf("record: %+v, %v", left, err)
	}
	pd, err := s.PersonalData(ctx, sub.Email)
	must(t, err)
	if len(pd.Clicks) != 2 || pd.Clicks[0].Issue != 3 || pd.Clicks[0].Link != 1 || !pd.Clicks[1].At.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("personal data's clicks: %+v (the 100-day-old one must be gone)", pd.Clicks)
	}
	_, err = s.Erase(ctx, sub.Email)
	must(t, err)
	again, err := s.Subscribe(ctx, store.SubscribeRequest{Email: sub.Email, Activate: true})
	must(t, err)
	pd, err = s.PersonalData(ctx, again.Email)
	must(t, err)
	if len(pd.Clicks) != 0 {
		t.Fatalf("clicks after the erasure: %+v", pd.Clicks)
	}
	// The erasure took the key itself, not only what the new id reads.
	if again.ID == sub.ID {
		t.Fatalf("the erased id was given again")
	}
}

// EventEngagement: an event keeps the one engagement id however often
// the fan-out asks (a retry signs its mails as the first run did), two
// events have two, and no issue made before or after has any of them
// (the counts of an event and an issue never add up under one id).
func testEventEngagement(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	before, err := s.CreateIssue(ctx, store.IssueContent{Subject: "Before", Body: "b"}, "")
	must(t, err)
	first, err := s.EventEngagement(ctx, "ev_first")
	must(t, err)
	again, err := s.EventEngagement(ctx, "ev_first")
	must(t, err)
	other, err := s.EventEngagement(ctx, "ev_other")
	must(t, err)
	after, err := s.CreateIssue(ctx, store.IssueContent{Subject: "After", Body: "a"}, "")
	must(t, err)
	if first <= 0 || again != first {
		t.Fatalf("event ev_first: %d, then %d; want one id, kept", first, again)
	}
	for _, id := range []int64{before.ID, after.ID, other} {
		if id == first {
			t.Fatalf("ids: event %d, other event %d, issues %d and %d: one is shared", first, other, before.ID, after.ID)
		}
	}
	if other == before.ID || other == after.ID {
		t.Fatalf("the other event's id %d is an issue's (%d, %d)", other, before.ID, after.ID)
	}
	if _, err := s.EventEngagement(ctx, ""); err == nil {
		t.Fatal("an event without an id got an engagement id")
	}
}
