package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

// suppressed subscribes email, activates it and has it bounce or complain.
func suppressed(t *testing.T, s store.Store, email string, how store.FeedbackType) store.Subscriber {
	t.Helper()
	ctx := context.Background()
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: email, Name: "Owner", Activate: true, Topics: []string{"digest"}}))
	res, err := s.RecordFeedback(ctx, store.Feedback{Email: email, Type: how}, store.FeedbackPolicy{})
	if err != nil || !res.Changed {
		t.Fatalf("suppress %s: %+v %v", email, res, err)
	}
	return res.Subscriber
}

// onSuppressionList tells whether email is listed by Suppressed.
func onSuppressionList(t *testing.T, s store.Store, email string) bool {
	t.Helper()
	list, err := s.Suppressed(context.Background(), "", 0, 1000)
	must(t, err)
	return slices.ContainsFunc(list, func(sub store.Subscriber) bool { return sub.Email == email })
}

// testSuppressedSignup: a signup for a bounced or complained address
// leaves it suppressed (status, list, name, topics) until the person's own
// confirmation; it writes one confirmation per ReconfirmWindow, whoever
// asks; an activation or a signup without a confirmation changes nothing;
// the confirmation lifts the suppression with what the signup chose.
func testSuppressedSignup(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, how := range []store.FeedbackType{store.Complaint, store.HardBounce} {
		email := string(how) + "@x.io"
		before := suppressed(t, s, email, how)
		if before.Status != store.Complained && before.Status != store.Bounced {
			t.Fatalf("%s: set-up status %s", email, before.Status)
		}
		// No double opt-in (or an import) cannot activate it, nor can a
		// signup that writes no confirmation.
		for _, req := range []store.SubscribeRequest{
			{Email: email, Activate: true, Outbox: entry("welcome:" + email)},
			{Email: email, Name: "Stranger"},
		} {
			if got, err := s.Subscribe(ctx, req); !errors.Is(err, store.ErrSuppressed) || got.Status != before.Status {
				t.Fatalf("%s: %+v answered %+v %v, want ErrSuppressed", email, req, got, err)
			}
		}
		if outboxHas(t, s, "welcome:"+email) {
			t.Fatalf("%s: a refused activation wrote its welcome", email)
		}
		// A stranger's signup: the confirmation is written, nothing else.
		req := store.SubscribeRequest{Email: email, Name: "Stranger", Timezone: "Asia/Tokyo", Topics: []string{"updates"},
			Outbox: entry("confirm:" + email), Hold: store.ConfirmHold{Every: time.Hour, PerDay: 3}}
		got, err := s.Subscribe(ctx, req)
		if err != nil || got.Status != before.Status || !got.Reconfirming || got.ID != before.ID {
			t.Fatalf("%s: signup answered %+v %v, want the suppressed subscriber, reconfirming", email, got, err)
		}
		if !outboxHas(t, s, "confirm:"+email) {
			t.Fatalf("%s: no confirmation written", email)
		}
		stored, err := s.Get(ctx, email)
		if err != nil || stored.Status != before.Status || stored.Name != "Owner" || stored.Timezone != "" || !stored.Reconfirming {
			t.Fatalf("%s: a signup changed the suppressed subscriber: %+v %v", email, stored, err)
		}
		// The confirmation link names the subscriber by id: the same
		// answer, reconfirming.
		if byID, err := s.GetByID(ctx, stored.ID); err != nil || !reflect.DeepEqual(byID, stored) {
			t.Fatalf("%s by id: %+v %v, by address %+v", email, byID, err, stored)
		}
		if !onSuppressionList(t, s, email) {
			t.Fatalf("%s: a signup took the address off the suppression list", email)
		}
		if ids, _ := s.AudienceAfter(ctx, "", 0, 100); slices.Contains(ids, before.ID) {
			t.Fatalf("%s: a signup put a suppressed address in the audience", email)
		}
		// One confirmation per window, whoever asks, even with no hold.
		must(t, s.OutboxDone(ctx, "confirm:"+email))
		again := req
		again.Hold = store.ConfirmHold{}
		if _, err := s.Subscribe(ctx, again); !errors.Is(err, store.ErrConfirmHeld) {
			t.Fatalf("%s: a second confirmation within the window: %v", email, err)
		}
		if outboxHas(t, s, "confirm:"+email) {
			t.Fatalf("%s: a held signup wrote a confirmation", email)
		}
		// The person confirms: active with what the signup chose, off
		// the list, in the audience.
		sub, err := s.Confirm(ctx, email, entry("welcome:"+email))
		if err != nil || sub.Status != store.Active || sub.ConfirmedAt.IsZero() || !sub.UnsubscribedAt.IsZero() ||
			sub.Name != "Stranger" || sub.Timezone != "Asia/Tokyo" || !slices.Equal(sub.Topics, []string{"updates"}) {
			t.Fatalf("%s: confirm: %+v %v", email, sub, err)
		}
		if onSuppressionList(t, s, email) {
			t.Fatalf("%s: still on the suppression list after the person's confirmation", email)
		}
		if got, _ := s.Get(ctx, email); got.Reconfirming || got.Status != store.Active {
			t.Fatalf("%s: after confirming: %+v", email, got)
		}
		if ids, _ := s.AudienceAfter(ctx, "updates", 0, 100); !slices.Contains(ids, before.ID) {
			t.Fatalf("%s: not in its topic's audience after confirming: %v", email, ids)
		}
	}
	// A suppressed address nobody asked a confirmation for: an old
	// confirmation link does not lift it.
	suppressed(t, s, "old-link@x.io", store.Complaint)
	if _, err := s.Confirm(ctx, "old-link@x.io", entry("welcome:old-link@x.io")); !errors.Is(err, store.ErrNotPending) {
		t.Fatalf("confirming a complained address nobody asked for: %v", err)
	}
	if !onSuppressionList(t, s, "old-link@x.io") {
		t.Fatal("a refused confirmation lifted the suppression")
	}
}

// testSuppressedSignupCancelledAndLifted: an unsubscribe or a new bounce
// after a confirmation was asked for a suppressed address voids it (the
// link no longer lifts anything) but keeps the window; an admin's lift
// forgets it.
func testSuppressedSignupCancelledAndLifted(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	confirm := func(email string) store.SubscribeRequest {
		return store.SubscribeRequest{Email: email, Outbox: entry("confirm:" + email)}
	}
	for _, cancel := range []struct {
		name string
		do   func(email string) error
	}{
		{"unsubscribe", func(e string) error { _, err := s.Unsubscribe(ctx, e, "confirm:"+e); return err }},
		{"bounce", func(e string) error { return s.MarkBounced(ctx, e) }},
		{"report", func(e string) error {
			_, err := s.RecordFeedback(ctx, store.Feedback{Email: e, Type: store.HardBounce}, store.FeedbackPolicy{})
			return err
		}},
	} {
		email := cancel.name + "@x.io"
		suppressed(t, s, email, store.HardBounce)
		if got, err := s.Subscribe(ctx, confirm(email)); err != nil || !got.Reconfirming {
			t.Fatalf("%s: %+v %v", email, got, err)
		}
		must(t, cancel.do(email))
		if got, _ := s.Get(ctx, email); got.Reconfirming || got.Status != store.Bounced {
			t.Fatalf("%s: after %s: %+v", email, cancel.name, got)
		}
		if _, err := s.Confirm(ctx, email, entry("welcome:"+email)); !errors.Is(err, store.ErrNotPending) {
			t.Fatalf("%s: a cancelled confirmation lifted the suppression: %v", email, err)
		}
		must(t, s.OutboxDone(ctx, "confirm:"+email))
		if _, err := s.Subscribe(ctx, confirm(email)); !errors.Is(err, store.ErrConfirmHeld) {
			t.Fatalf("%s: cancelling gave the window back: %v", email, err)
		}
	}
	// The admin lifts a complaint while a confirmation waits: the address
	// is unsubscribed and an ordinary signup takes it from there.
	suppressed(t, s, "lifted@x.io", store.Complaint)
	must2(t)(s.Subscribe(ctx, confirm("lifted@x.io")))
	if got, err := s.LiftSuppression(ctx, "lifted@x.io"); err != nil || got.Status != store.Unsubscribed {
		t.Fatalf("lift: %+v %v", got, err)
	}
	if got, err := s.Subscribe(ctx, confirm("lifted@x.io")); err != nil || got.Status != store.Pending || got.Reconfirming {
		t.Fatalf("signup after the lift: %+v %v", got, err)
	}
}

// testHoldsKeyOnTheMailbox: the confirmation's cooldown and daily cap count
// per mailbox (+tags, Gmail's dots and googlemail.com are one inbox), each
// kind of mail apart; a held signup of a new spelling stores nothing;
// every subscriber keeps the address as typed.
func testHoldsKeyOnTheMailbox(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	hold := store.ConfirmHold{Every: time.Hour, PerDay: 3}
	req := func(email string) store.SubscribeRequest {
		return store.SubscribeRequest{Email: email, Name: "x", Outbox: entry("confirm:" + email), Hold: hold}
	}
	first, err := s.Subscribe(ctx, req("first.last+news@gmail.com"))
	if err != nil || first.Email != "first.last+news@gmail.com" {
		t.Fatalf("first signup: %+v %v", first, err)
	}
	for _, e := range []string{"first.last@gmail.com", "firstlast+1@gmail.com", "f.i.r.s.t.l.a.s.t+2@googlemail.com"} {
		if _, err := s.Subscribe(ctx, req(e)); !errors.Is(err, store.ErrConfirmHeld) {
			t.Fatalf("%s within the cooldown of its mailbox: %v", e, err)
		}
		if _, err := s.Get(ctx, e); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a held signup stored %s: %v", e, err)
		}
		if outboxHas(t, s, "confirm:"+e) {
			t.Fatalf("a held signup wrote a confirmation for %s", e)
		}
	}
	// Another mailbox, another kind: their own allowances.
	if _, err := s.Subscribe(ctx, req("first.last@example.com")); err != nil {
		t.Fatalf("another mailbox: %v", err)
	}
	for i, want := range []bool{true, false} {
		ok, err := s.TakeHold(ctx, store.HoldUnsubscribe, []string{"firstlast@gmail.com", "first.last+x@googlemail.com"}[i], hold)
		if err != nil || ok != want {
			t.Fatalf("unsubscribe allowance %d: %v %v, want %v", i, ok, err, want)
		}
	}
	// The daily cap counts the mailbox too: a cooldown as short as the
	// store keeps (Redis: a second), three a day. Each mail waits for the
	// cooldown to pass, polled; the fourth is refused for the day.
	short := store.ConfirmHold{Every: time.Millisecond, PerDay: 3}
	take := func(i int) bool {
		ok, err := s.TakeHold(ctx, store.HoldUnsubscribe, fmt.Sprintf("capped+%d@x.io", i), short)
		must(t, err)
		return ok
	}
	for i := range 3 {
		poll.True(t, 10*time.Second, fmt.Sprintf("mail %d within the daily cap", i+1), func() bool { return take(i) })
	}
	// Past the cooldown, the cap still refuses. A probe of another kind on
	// the same mailbox, taken after the third mail, tells when the third's
	// cooldown has surely run out: once the probe's own has.
	probe := func() bool {
		ok, err := s.TakeHold(ctx, store.HoldConfirm, "capped@x.io", short)
		must(t, err)
		return ok
	}
	if !probe() {
		t.Fatal("the probe's first take was held")
	}
	poll.True(t, 10*time.Second, "the cooldown to run out", probe)
	if take(4) {
		t.Fatal("a fourth mail to the mailbox within the day")
	}
	// The zero hold counts nothing.
	for range 3 {
		if ok, err := s.TakeHold(ctx, store.HoldUnsubscribe, "free@x.io", store.ConfirmHold{}); err != nil || !ok {
			t.Fatalf("zero hold: %v %v", ok, err)
		}
	}
}

// testHoldGivenBack: a mail that never went out (unrenderable) gives its
// count back: the next signup of the mailbox, or the next suppressed
// address's confirmation, is not held by it.
func testHoldGivenBack(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	hold := store.ConfirmHold{Every: time.Hour, PerDay: 1}
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "v@x.io", Outbox: entry("confirm:v@x.io"), Hold: hold}))
	must(t, s.GiveBackHold(ctx, store.HoldConfirm, "v+other@x.io"))
	if _, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "v@x.io", Outbox: entry("confirm:v@x.io"), Hold: hold}); err != nil {
		t.Fatalf("after the count was given back (cooldown and the day's one): %v", err)
	}
	ok, err := s.TakeHold(ctx, store.HoldUnsubscribe, "u@x.io", hold)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	must(t, s.GiveBackHold(ctx, store.HoldUnsubscribe, "u@x.io"))
	if ok, err := s.TakeHold(ctx, store.HoldUnsubscribe, "u@x.io", hold); err != nil || !ok {
		t.Fatalf("unsubscribe allowance after giving back: %v %v", ok, err)
	}
	// A suppressed address's window comes back too.
	suppressed(t, s, "sup@x.io", store.Complaint)
	must2(t)(s.Subscribe(ctx, store.SubscribeRequest{Email: "sup@x.io", Outbox: entry("confirm:sup@x.io")}))
	must(t, s.GiveBackHold(ctx, store.HoldConfirm, "sup@x.io"))
	if got, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "sup@x.io", Outbox: entry("confirm:sup@x.io")}); err != nil || !got.Reconfirming {
		t.Fatalf("suppressed address after giving back: %+v %v", got, err)
	}
	// Giving back what was never taken is harmless.
	must(t, s.GiveBackHold(ctx, store.HoldConfirm, "never@x.io"))
}
