package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

func testSubscribeConfirmUnsubscribe(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "a@x.io", Timezone: "Europe/Berlin", Outbox: entry("confirm:a@x.io")})
	if err != nil || sub.Status != store.Pending || sub.ID == 0 || sub.CreatedAt.IsZero() || sub.Timezone != "Europe/Berlin" {
		t.Fatalf("subscribe: %+v %v", sub, err)
	}
	// Subscribing again while pending is allowed (the mail may be lost)
	// and keeps the id.
	again, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "a@x.io", Outbox: entry("confirm:a@x.io")})
	if err != nil || again.ID != sub.ID {
		t.Fatalf("re-subscribe pending: %+v %v", again, err)
	}
	got, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io"))
	if err != nil || got.Status != store.Active || got.ConfirmedAt.IsZero() {
		t.Fatalf("confirm: %+v %v", got, err)
	}
	if _, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io")); !errors.Is(err, store.ErrAlreadyActive) {
		t.Fatalf("second confirm: %v", err)
	}
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "a@x.io", Outbox: entry("confirm:a@x.io")}); !errors.Is(err, store.ErrAlreadyActive) {
		t.Fatalf("subscribe active: %v", err)
	}
	due, _ := s.OutboxDue(ctx, time.Now(), 10)
	if len(due) != 2 {
		t.Fatalf("outbox before unsubscribe: %d entries, want confirm and welcome", len(due))
	}
	gone, err := s.Unsubscribe(ctx, "a@x.io", "welcome:a@x.io")
	if err != nil || gone.Status != store.Unsubscribed || gone.UnsubscribedAt.IsZero() {
		t.Fatalf("unsubscribe: %+v %v", gone, err)
	}
	due, _ = s.OutboxDue(ctx, time.Now(), 10)
	if len(due) != 1 || due[0].ID != "confirm:a@x.io" || string(due[0].Body) != "task confirm:a@x.io" {
		t.Fatalf("unsubscribe must drop the welcome entry only: %+v", due)
	}
	if _, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io")); !errors.Is(err, store.ErrNotPending) {
		t.Fatalf("an old confirm link re-activated an unsubscribed address: %v", err)
	}
	if _, err := s.Get(ctx, "nobody@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	// By id, as the links in mails name a subscriber: the same record as
	// by address, whatever its status.
	byAddress, err := s.Get(ctx, "a@x.io")
	must(t, err)
	if byID, err := s.GetByID(ctx, sub.ID); err != nil || !reflect.DeepEqual(byID, byAddress) {
		t.Fatalf("get by id %d: %+v %v, by address %+v", sub.ID, byID, err, byAddress)
	}
	for _, id := range []int64{0, -1, sub.ID + 1000} {
		if got, err := s.GetByID(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get by unknown id %d: %+v %v", id, got, err)
		}
	}
	if _, err := s.Unsubscribe(ctx, "nobody@x.io"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unsubscribe unknown: %v", err)
	}
}

// The subscribe answer must be what was stored, on both paths of the
// script: a new address (fields echoed) and a pending one (read back).
func testSubscribeAnswersWhatItStored(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, req := range []store.SubscribeRequest{
		{Email: "c@x.io", Name: "Cé", Timezone: "Asia/Tokyo", Outbox: entry("confirm:c@x.io")},
		{Email: "c@x.io", Name: "C again", Outbox: entry("confirm:c@x.io")},
		{Email: "d@x.io", Name: "D", Activate: true, Outbox: entry("welcome:d@x.io")},
		{Email: "e@x.io"},
	} {
		answered, err := s.Subscribe(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", req.Email, err)
		}
		stored, err := s.Get(ctx, req.Email)
		if err != nil || !reflect.DeepEqual(answered, stored) {
			t.Fatalf("%s: answered %+v, stored %+v (%v)", req.Email, answered, stored, err)
		}
	}
}

func testActivateAtOnceAndBounce(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "b@x.io", Activate: true, Outbox: entry("welcome:b@x.io")})
	if err != nil || sub.Status != store.Active || sub.ConfirmedAt.IsZero() {
		t.Fatalf("%+v %v", sub, err)
	}
	if err := s.MarkBounced(ctx, "b@x.io"); err != nil {
		t.Fatal(err)
	}
	// Unsubscribing a bounced address must not make it look reachable.
	got, _ := s.Unsubscribe(ctx, "b@x.io")
	if got.Status != store.Bounced {
		t.Fatalf("bounced became %s", got.Status)
	}
}

func testOutbox(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	for i := 0; i < 5; i++ {
		e := outbox.Entry{ID: fmt.Sprint("e", i), Due: now.Add(time.Duration(i-3) * time.Minute), Body: []byte{byte(i)}}
		if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("o%d@x.io", i), Outbox: e}); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.OutboxDue(ctx, now, 2)
	if err != nil || len(due) != 2 || due[0].ID != "e0" || due[1].ID != "e1" {
		t.Fatalf("oldest two due: %+v %v", due, err)
	}
	if err := s.OutboxDone(ctx, "e0"); err != nil {
		t.Fatal(err)
	}
	due, _ = s.OutboxDue(ctx, now, 10)
	if len(due) != 3 || due[0].ID != "e1" {
		t.Fatalf("after done: %+v", due)
	}
}

func testMarks(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, shared := range []bool{false, true} {
		m := store.Mark{Kind: fmt.Sprint("digest", shared), Key: "2026-W49", SubscriberID: 12345, Shared: shared}
		if c, err := claimOne(ctx, s, m, time.Minute); err != nil || c != store.Claimed {
			t.Fatalf("first claim: %v %v", c, err)
		}
		if c, _ := claimOne(ctx, s, m, time.Minute); c != store.Busy {
			t.Fatalf("second claim while held: %v, want Busy", c)
		}
		if err := s.ReleaseMarks(ctx, []store.Mark{m}); err != nil {
			t.Fatal(err)
		}
		if c, _ := claimOne(ctx, s, m, time.Minute); c != store.Claimed {
			t.Fatalf("claim after release: %v", c)
		}
		if err := s.MarkSent(ctx, m); err != nil {
			t.Fatal(err)
		}
		if c, _ := claimOne(ctx, s, m, time.Minute); c != store.AlreadySent {
			t.Fatalf("claim after sent: %v, want AlreadySent", c)
		}
		other := m
		other.SubscriberID++
		if c, _ := claimOne(ctx, s, other, time.Minute); c != store.Claimed {
			t.Fatalf("neighbour's claim: %v", c)
		}
		// Many at once, one of them twice: each is sent, none claimed.
		third := other
		third.SubscriberID++
		if err := s.MarkSent(ctx, other, third, other); err != nil {
			t.Fatal(err)
		}
		for _, mk := range []store.Mark{other, third} {
			if c, _ := claimOne(ctx, s, mk, time.Minute); c != store.AlreadySent {
				t.Fatalf("after marking many: %v, want AlreadySent", c)
			}
		}
	}
}

// testBatchClaims claims a digest batch at once: one mark free, one sent,
// one held; ids close together and far apart (a sparse audience).
func testBatchClaims(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, ids := range [][3]int64{{10, 11, 12}, {3, 700001, 1400003}} {
		key := fmt.Sprint("batch-", ids[1])
		mk := func(id int64) store.Mark { return store.Mark{Kind: "digest", Key: key, SubscriberID: id, Shared: true} }
		must(t, s.MarkSent(ctx, mk(ids[1])))
		if c, err := claimOne(ctx, s, mk(ids[2]), time.Minute); err != nil || c != store.Claimed {
			t.Fatalf("claim %d: %v %v", ids[2], c, err)
		}
		claims, err := s.ClaimMarks(ctx, "", []store.Mark{mk(ids[0]), mk(ids[1]), mk(ids[2])}, time.Minute)
		want := []store.Claim{store.Claimed, store.AlreadySent, store.Busy}
		if err != nil || len(claims) != 3 || claims[0] != want[0] || claims[1] != want[1] || claims[2] != want[2] {
			t.Fatalf("ids %v: %v %v, want %v", ids, claims, err, want)
		}
		// The claim just taken holds against the next run.
		if c, _ := claimOne(ctx, s, mk(ids[0]), time.Minute); c != store.Busy {
			t.Fatalf("id %d claimed twice: %v", ids[0], c)
		}
	}
}

func testClaimExpires(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	m := store.Mark{Kind: "welcome", SubscriberID: 7, Shared: true}
	if c, _ := claimOne(ctx, s, m, 50*time.Millisecond); c != store.Claimed {
		t.Fatal("claim")
	}
	// A worker that died holding the claim must not block the mail for
	// ever: once the claim expires a retry may send.
	poll.Until(t, 5*time.Second, func() error {
		c, err := claimOne(ctx, s, m, time.Minute)
		if err == nil && c != store.Claimed {
			err = fmt.Errorf("the dead worker's claim still holds: %v", c)
		}
		return err
	})
}

// testConcurrentSubscribeUnsubscribe races both operations on one address:
// whatever the order, the end state is one of the two that were asked for,
// and the active set agrees with the subscriber's status.
func testConcurrentSubscribeUnsubscribe(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		email := "race" + strconv.Itoa(round) + "@x.io"
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var err error
				if i%2 == 0 {
					_, err = s.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true, Outbox: entry("welcome:" + email)})
				} else {
					_, err = s.Unsubscribe(ctx, email, "welcome:"+email)
				}
				// Already active, or not there yet: the race's normal answers.
				if err != nil && !errors.Is(err, store.ErrAlreadyActive) && !errors.Is(err, store.ErrNotFound) {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sub, err := s.Get(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		if sub.Status != store.Active && sub.Status != store.Unsubscribed {
			t.Fatalf("state %q was never asked for", sub.Status)
		}
		// The digest walks the active set: it must agree with the status.
		ids, err := s.AudienceAfter(ctx, "", sub.ID-1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if inSet := len(ids) == 1 && ids[0] == sub.ID; inSet != (sub.Status == store.Active) {
			t.Fatalf("status %s but in active set = %v", sub.Status, inSet)
		}
	}
}

func testDigestRunOnceWithItsItems(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	if _, err := s.DigestRun(ctx, "2026-W49"); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("unknown run: %v", err)
	}
	must2(t)(s.AddItem(ctx, store.Item{Title: "One", URL: "https://x/1"}))
	must2(t)(s.AddItem(ctx, store.Item{Title: "Two", URL: "https://x/2", Summary: "second"}))
	for i := 0; i < 3; i++ {
		must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("a%d@x.io", i), Activate: true}))
	}
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "pending@x.io"}))
	run, created, err := s.StartDigestRun(ctx, "2026-W49")
	if err != nil || !created || run.State != store.RunPlanning || len(run.Items) != 2 || run.Audience != 3 {
		t.Fatalf("start: %+v created=%v %v", run, created, err)
	}
	if run.Items[1].Summary != "second" || run.Items[0].PublishedAt.IsZero() {
		t.Fatalf("items: %+v", run.Items)
	}
	// The items alone, as a mail that lists them reads them.
	if items, err := s.DigestItems(ctx, "2026-W49"); err != nil || !reflect.DeepEqual(items, run.Items) {
		t.Fatalf("the run's items alone: %+v %v, want %+v", items, err, run.Items)
	}
	if _, err := s.DigestItems(ctx, "2026-W01"); !errors.Is(err, store.ErrNoRun) {
		t.Fatalf("the items of an unknown run: %v", err)
	}
	// A second start (another replica, a retry) changes nothing.
	must2(t)(s.AddItem(ctx, store.Item{Title: "Three", URL: "https://x/3"}))
	again, created, _ := s.StartDigestRun(ctx, "2026-W49")
	if created || len(again.Items) != 2 {
		t.Fatalf("second start: created=%v items=%d", created, len(again.Items))
	}
	// The next period takes only what was published since.
	next, _, _ := s.StartDigestRun(ctx, "2026-W50")
	if p, err := s.LatestDigestPeriod(ctx); err != nil || p != "2026-W50" {
		t.Fatalf("latest period %q %v", p, err)
	}
	if len(next.Items) != 1 || next.Items[0].Title != "Three" {
		t.Fatalf("next period items: %+v", next.Items)
	}
	empty, _, _ := s.StartDigestRun(ctx, "2026-W51")
	if empty.State != store.RunEmpty {
		t.Fatalf("a period with nothing new: %s", empty.State)
	}
}

func testKeysetWalkAndOutcomes(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 25; i++ {
		must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("k%02d@x.io", i), Activate: true}))
	}
	must2(t)(s.Unsubscribe(ctx, "k03@x.io"))
	must(t, s.MarkBounced(ctx, "k04@x.io"))
	var all []int64
	cursor := int64(0)
	for {
		page, err := s.AudienceAfter(ctx, "", cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		cursor = page[len(page)-1]
	}
	if len(all) != 23 {
		t.Fatalf("walked %d active subscribers, want 23", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatal("pages are not in id order")
		}
	}
	k00, err := s.Get(ctx, "k00@x.io")
	must(t, err)
	subs, _ := s.SubscribersByID(ctx, []int64{k00.ID, 999999})
	if subs[0].Email != "k00@x.io" || subs[1].ID != 0 {
		t.Fatalf("by id: %+v", subs)
	}
	must2(t)(s.AddItem(ctx, store.Item{Title: "x", URL: "https://x"}))
	if _, _, err := s.StartDigestRun(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	must(t, s.SetOutcome(ctx, "p", store.OutcomeSkipped, 1, 2))
	must(t, s.SetOutcome(ctx, "p", store.OutcomeSkipped, 2)) // again: counted once
	must(t, s.SetOutcome(ctx, "p", store.OutcomeFailed, 3))
	must(t, s.MarkSent(ctx, store.Mark{Kind: "digest", Key: "p", SubscriberID: 5, Shared: true}))
	must(t, s.AdvanceDigestRun(ctx, "p", 10, 10, false))
	must(t, s.AdvanceDigestRun(ctx, "p", 10, 10, false)) // again: counted once
	must(t, s.AdvanceDigestRun(ctx, "p", 25, 13, false))
	must(t, s.AdvanceDigestRun(ctx, "p", 25, 0, true))
	run, _ := s.DigestRun(ctx, "p")
	if run.Skipped != 2 || run.Failed != 1 || run.Sent != 1 || run.Planned != 23 || run.Cursor != 25 || run.State != store.RunPlanned || run.PlannedAt.IsZero() {
		t.Fatalf("counters: %+v", run)
	}
	marks := []store.Mark{{Kind: "digest", Key: "p", SubscriberID: 5, Shared: true}, {Kind: "digest", Key: "p", SubscriberID: 6, Shared: true}}
	claims, err := s.ClaimMarks(ctx, "", marks, time.Minute)
	if err != nil || claims[0] != store.AlreadySent || claims[1] != store.Claimed {
		t.Fatalf("claims %v %v", claims, err)
	}
	must(t, s.ReleaseMarks(ctx, marks[1:]))
	if c, _ := claimOne(ctx, s, marks[1], time.Minute); c != store.Claimed {
		t.Fatal("release did not free the claim")
	}
}

func testImportNeverResubscribes(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "left@x.io", Activate: true}))
	must2(t)(s.Unsubscribe(ctx, "left@x.io"))
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "left@x.io", Activate: true, OnlyNew: true}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("import of a known address: %v", err)
	}
	if sub, _ := s.Get(ctx, "left@x.io"); sub.Status != store.Unsubscribed {
		t.Fatalf("import re-subscribed someone who left: %s", sub.Status)
	}
	if sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "new@x.io", Activate: true, OnlyNew: true}); err != nil || sub.Status != store.Active {
		t.Fatalf("new address: %+v %v", sub, err)
	}
	if due, _ := s.OutboxDue(ctx, time.Now().Add(time.Hour), 10); len(due) != 0 {
		t.Fatalf("an empty outbox entry was written: %+v", due)
	}
}

// testConfirmHold: a pending address gets one confirmation per cooldown,
// and a held request changes nothing (not the name the welcome will use).
func testConfirmHold(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	hold := store.ConfirmHold{Every: time.Hour, PerDay: 3}
	req := store.SubscribeRequest{Email: "victim@x.io", Name: "Ann", Outbox: entry("confirm:victim@x.io"), Hold: hold}
	first, err := s.Subscribe(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.OutboxDone(ctx, "confirm:victim@x.io"))
	for i := 0; i < 5; i++ {
		again := req
		again.Name = "WIN a prize at https://evil.example/"
		sub, err := s.Subscribe(ctx, again)
		if !errors.Is(err, store.ErrConfirmHeld) || sub.ID != first.ID {
			t.Fatalf("signup %d within the cooldown: %+v %v", i+2, sub, err)
		}
	}
	if due, _ := s.OutboxDue(ctx, time.Now().Add(time.Hour), 10); len(due) != 0 {
		t.Fatalf("a held signup wrote a confirmation: %+v", due)
	}
	if sub, _ := s.Get(ctx, "victim@x.io"); sub.Name != "Ann" || sub.Status != store.Pending {
		t.Fatalf("a held signup changed the subscriber: %+v", sub)
	}
	// Without a hold (the zero value), as before: every signup writes one.
	free := store.SubscribeRequest{Email: "free@x.io", Outbox: entry("confirm:free@x.io")}
	must2(t)(s.Subscribe(ctx, free))
	must2(t)(s.Subscribe(ctx, free))
}

// testClaimOwnerTakesOver: a claim names its task; the same task's retry
// takes it over at once (its earlier attempt died holding it), while
// another task, or a caller without a name, waits for the expiry. Both
// mark shapes: one claims hash per key (shared), a key per mark.
func testClaimOwnerTakesOver(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, m := range []store.Mark{
		{Kind: "digest", Key: "owned", SubscriberID: 41, Shared: true},
		{Kind: "events", Key: "owned-batch", SubscriberID: 42},
	} {
		claim := func(owner string) store.Claim {
			t.Helper()
			claims, err := s.ClaimMarks(ctx, owner, []store.Mark{m}, time.Minute)
			if err != nil || len(claims) != 1 {
				t.Fatalf("claim %+v as %q: %v %v", m, owner, claims, err)
			}
			return claims[0]
		}
		if c := claim("digest:owned:b:1"); c != store.Claimed {
			t.Fatalf("%+v first claim: %v", m, c)
		}
		if c := claim("digest:owned:b:2"); c != store.Busy {
			t.Fatalf("%+v claimed by another task while held: %v", m, c)
		}
		if c := claim(""); c != store.Busy {
			t.Fatalf("%+v claimed without an owner while held: %v", m, c)
		}
		if c := claim("digest:owned:b:1"); c != store.Claimed {
			t.Fatalf("%+v not taken over by its own task's retry: %v", m, c)
		}
		// The take-over renewed the claim for the same owner; others
		// still wait.
		if c := claim("digest:owned:b:2"); c != store.Busy {
			t.Fatalf("%+v after take-over, another task: %v", m, c)
		}
		must(t, s.MarkSent(ctx, m))
		if c := claim("digest:owned:b:1"); c != store.AlreadySent {
			t.Fatalf("%+v after sent: %v", m, c)
		}
	}
	// A batch of shared marks in one call (the digest's path), partly
	// held by the same task and partly by another.
	mk := func(id int64) store.Mark {
		return store.Mark{Kind: "digest", Key: "owned-batch", SubscriberID: id, Shared: true}
	}
	if c, err := s.ClaimMarks(ctx, "b:1", []store.Mark{mk(1), mk(2)}, time.Minute); err != nil || c[0] != store.Claimed || c[1] != store.Claimed {
		t.Fatalf("batch as b:1: %v %v", c, err)
	}
	if c, err := s.ClaimMarks(ctx, "b:2", []store.Mark{mk(3)}, time.Minute); err != nil || c[0] != store.Claimed {
		t.Fatalf("batch as b:2: %v %v", c, err)
	}
	c, err := s.ClaimMarks(ctx, "b:1", []store.Mark{mk(1), mk(2), mk(3), mk(4)}, time.Minute)
	want := []store.Claim{store.Claimed, store.Claimed, store.Busy, store.Claimed}
	if err != nil || !slices.Equal(c, want) {
		t.Fatalf("retry of b:1: %v %v, want %v", c, err, want)
	}
}

// testFeedbackPolicy is the one policy for bounce and complaint reports:
// hard → bounced at once; soft → bounced at the limit; complaint →
// complained, which nothing overrides; the same report twice counts once;
// an unknown address changes nothing.
func testFeedbackPolicy(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	pol := store.FeedbackPolicy{SoftLimit: 3}
	sub := func(email string) store.Subscriber {
		got, err := s.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true})
		must(t, err)
		return got
	}
	hard, soft, spam := sub("hard@x.io"), sub("soft@x.io"), sub("spam@x.io")

	res, err := s.RecordFeedback(ctx, store.Feedback{ID: "r1", SubscriberID: hard.ID, Type: store.HardBounce}, pol)
	if err != nil || !res.Changed || res.Subscriber.Status != store.Bounced {
		t.Fatalf("hard bounce: %+v %v", res, err)
	}
	for i := 1; i <= 3; i++ {
		res, err := s.RecordFeedback(ctx, store.Feedback{ID: fmt.Sprint("s", i), Email: "soft@x.io", Type: store.SoftBounce}, pol)
		want := store.Active
		if i == 3 {
			want = store.Bounced
		}
		if err != nil || res.SoftBounces != i || res.Subscriber.Status != want {
			t.Fatalf("soft bounce %d: %+v %v, want %s", i, res, err, want)
		}
		if i == 2 {
			// The same report again counts once.
			again, err := s.RecordFeedback(ctx, store.Feedback{ID: "s2", Email: "soft@x.io", Type: store.SoftBounce}, pol)
			if err != nil || !again.Duplicate {
				t.Fatalf("a repeated soft bounce: %+v %v", again, err)
			}
			if got, _ := s.Get(ctx, "soft@x.io"); got.Status != store.Active {
				t.Fatalf("after a repeated report: %s", got.Status)
			}
		}
	}
	res, err = s.RecordFeedback(ctx, store.Feedback{ID: "c1", Email: "spam@x.io", SubscriberID: spam.ID, Type: store.Complaint}, pol)
	if err != nil || !res.Changed || res.Subscriber.Status != store.Complained {
		t.Fatalf("complaint: %+v %v", res, err)
	}
	if again, err := s.RecordFeedback(ctx, store.Feedback{ID: "c1", Email: "spam@x.io", Type: store.Complaint}, pol); err != nil || !again.Duplicate {
		t.Fatalf("the same complaint twice: %+v %v", again, err)
	}
	// Nothing overrides a complaint: a later hard bounce, an unsubscribe.
	must2(t)(s.RecordFeedback(ctx, store.Feedback{ID: "h9", Email: "spam@x.io", Type: store.HardBounce}, pol))
	must2(t)(s.Unsubscribe(ctx, "spam@x.io"))
	if got, _ := s.Get(ctx, "spam@x.io"); got.Status != store.Complained {
		t.Fatalf("a complaint was overridden: %s", got.Status)
	}
	// No mail to any of them: none is in the digest audience.
	ids, err := s.AudienceAfter(ctx, "", 0, 100)
	if err != nil || slices.Contains(ids, hard.ID) || slices.Contains(ids, soft.ID) || slices.Contains(ids, spam.ID) {
		t.Fatalf("audience after bounces and a complaint: %v %v", ids, err)
	}
	// Import and an activation cannot bring a complaint back; only the
	// person's own confirmation can (testSuppressedSignup).
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "spam@x.io", Activate: true}); !errors.Is(err, store.ErrSuppressed) {
		t.Fatalf("activating a complained address: %v", err)
	}
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "spam@x.io", Activate: true, OnlyNew: true}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("importing a complained address: %v", err)
	}
	if got, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "spam@x.io"}); !errors.Is(err, store.ErrSuppressed) || got.Status != store.Complained {
		t.Fatalf("signing up again without a confirmation: %+v %v, want complained and ErrSuppressed", got, err)
	}
	// Unknown address or a tag whose id and address disagree: not found,
	// nothing changed.
	if _, err := s.RecordFeedback(ctx, store.Feedback{ID: "u1", Email: "nobody@x.io", Type: store.HardBounce}, pol); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown address: %v", err)
	}
	if _, err := s.RecordFeedback(ctx, store.Feedback{ID: "u2", Email: "soft@x.io", SubscriberID: hard.ID, Type: store.Complaint}, pol); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("id and address of two people: %v", err)
	}
	if got, _ := s.Get(ctx, "hard@x.io"); got.Status != store.Bounced {
		t.Fatalf("a mismatched report changed %s", got.Status)
	}
	if _, err := s.RecordFeedback(ctx, store.Feedback{Email: "soft@x.io", Type: "maybe"}, pol); err == nil {
		t.Fatal("an unknown report type was accepted")
	}
}

// testSuppressionsListAndLift: the list pages by id and filters by
// reason; lifting a bounce reactivates, lifting a complaint unsubscribes.
func testSuppressionsListAndLift(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	var emails []string
	for i := range 5 {
		e := fmt.Sprintf("s%d@x.io", i)
		emails = append(emails, e)
		must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true}))
	}
	must(t, s.MarkBounced(ctx, emails[0])) // during the SMTP conversation
	must2(t)(s.RecordFeedback(ctx, store.Feedback{Email: emails[1], Type: store.HardBounce}, store.FeedbackPolicy{}))
	must2(t)(s.RecordFeedback(ctx, store.Feedback{Email: emails[3], Type: store.Complaint}, store.FeedbackPolicy{}))
	// The list pages in id order, which is not the order of signing up
	// (an id carries its shard).
	var want []store.Subscriber
	for _, i := range []int{0, 1, 3} {
		sub, err := s.Get(ctx, emails[i])
		must(t, err)
		want = append(want, sub)
	}
	slices.SortFunc(want, func(a, b store.Subscriber) int { return cmp.Compare(a.ID, b.ID) })
	page1, err := s.Suppressed(ctx, "", 0, 2)
	if err != nil || len(page1) != 2 || page1[0].Email != want[0].Email || page1[1].Email != want[1].Email {
		t.Fatalf("page 1: %+v %v", page1, err)
	}
	page2, err := s.Suppressed(ctx, "", page1[1].ID, 2)
	if err != nil || len(page2) != 1 || page2[0].Email != want[2].Email || page2[0].Status != want[2].Status {
		t.Fatalf("page 2: %+v %v", page2, err)
	}
	if c, err := s.Suppressed(ctx, store.Complained, 0, 10); err != nil || len(c) != 1 || c[0].Email != emails[3] {
		t.Fatalf("complained only: %+v %v", c, err)
	}
	if _, err := s.Suppressed(ctx, store.Active, 0, 10); err == nil {
		t.Fatal("listing active as a suppression was accepted")
	}
	if got, err := s.LiftSuppression(ctx, emails[1]); err != nil || got.Status != store.Active {
		t.Fatalf("lift a bounce: %+v %v", got, err)
	}
	if got, err := s.LiftSuppression(ctx, emails[3]); err != nil || got.Status != store.Unsubscribed {
		t.Fatalf("lift a complaint: %+v %v", got, err)
	}
	if _, err := s.LiftSuppression(ctx, emails[2]); !errors.Is(err, store.ErrNotSuppressed) {
		t.Fatalf("lift an active address: %v", err)
	}
	if b, err := s.Suppressed(ctx, "", 0, 10); err != nil || len(b) != 1 || b[0].Email != emails[0] {
		t.Fatalf("after lifting: %+v %v", b, err)
	}
	ids, err := s.AudienceAfter(ctx, "", 0, 100)
	if err != nil || len(ids) != 3 {
		t.Fatalf("active after lifting a bounce: %v %v", ids, err)
	}
}
