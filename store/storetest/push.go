package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/store"
)

// browser is a push subscription whose keys tell it from the others.
func browser(n int) store.PushSubscription {
	return store.PushSubscription{Endpoint: fmt.Sprintf("https://push.example.net/b/%d", n),
		P256DH: bytes.Repeat([]byte{4, byte(n)}, 33)[:65], Auth: bytes.Repeat([]byte{byte(n)}, 16)}
}

func endpoints(ps []store.PushSubscription) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Endpoint
	}
	return out
}

// Push subscriptions: stored with an active subscriber only, listed
// oldest first with their keys, renewed in place, capped by evicting the
// oldest, deleted one at a time, all at once, and with the subscription
// when the person leaves (not when the address bounces).
func testPushSubscriptions(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "push@x.io", Activate: true})
	must(t, err)
	pending, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "pending-push@x.io"})
	must(t, err)

	if err := s.AddPushSubscription(ctx, pending.ID, browser(1)); !errors.Is(err, store.ErrNotActive) {
		t.Fatalf("a pending subscriber's browser: %v, want ErrNotActive", err)
	}
	if err := s.AddPushSubscription(ctx, 999999, browser(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown id: %v, want ErrNotFound", err)
	}
	if got, err := s.PushSubscriptions(ctx, pending.ID); err != nil || len(got) != 0 {
		t.Fatalf("refused browsers were stored: %v %v", got, err)
	}

	must(t, s.AddPushSubscription(ctx, a.ID, browser(1)))
	must(t, s.AddPushSubscription(ctx, a.ID, browser(2)))
	got, err := s.PushSubscriptions(ctx, a.ID)
	must(t, err)
	if len(got) != 2 || got[0].Endpoint != browser(1).Endpoint || !bytes.Equal(got[0].P256DH, browser(1).P256DH) ||
		!bytes.Equal(got[0].Auth, browser(1).Auth) || got[0].CreatedAt.IsZero() {
		t.Fatalf("stored %+v", got)
	}
	// Browser 1 renews its keys: replaced, not added, and now the newest.
	renewed := browser(1)
	renewed.Auth = bytes.Repeat([]byte{9}, 16)
	must(t, s.AddPushSubscription(ctx, a.ID, renewed))
	got, _ = s.PushSubscriptions(ctx, a.ID)
	if fmt.Sprint(endpoints(got)) != fmt.Sprint([]string{browser(2).Endpoint, browser(1).Endpoint}) || !bytes.Equal(got[1].Auth, renewed.Auth) {
		t.Fatalf("after renewal %+v", got)
	}

	// Past the cap the oldest go: 2, then the renewed 1.
	for n := 3; n <= store.MaxPushSubscriptions+2; n++ {
		must(t, s.AddPushSubscription(ctx, a.ID, browser(n)))
	}
	got, _ = s.PushSubscriptions(ctx, a.ID)
	if len(got) != store.MaxPushSubscriptions || got[0].Endpoint != browser(3).Endpoint ||
		got[len(got)-1].Endpoint != browser(store.MaxPushSubscriptions+2).Endpoint {
		t.Fatalf("after %d browsers: %v", store.MaxPushSubscriptions+2, endpoints(got))
	}
	for _, e := range endpoints(got) {
		if e == browser(1).Endpoint || e == browser(2).Endpoint {
			t.Fatalf("%s should have been evicted: %v", e, endpoints(got))
		}
	}

	// A 404 deletes one; an unknown endpoint is no error.
	must(t, s.DeletePushSubscription(ctx, a.ID, browser(5).Endpoint))
	must(t, s.DeletePushSubscription(ctx, a.ID, "https://push.example.net/none"))
	all, err := s.PushSubscriptionsOf(ctx, []int64{pending.ID, a.ID})
	must(t, err)
	if len(all) != 2 || len(all[0]) != 0 || len(all[1]) != store.MaxPushSubscriptions-1 {
		t.Fatalf("by ids: %d lists, %d and %d browsers", len(all), len(all[0]), len(all[1]))
	}
	have, err := s.HavePushSubscriptions(ctx, []int64{pending.ID, a.ID, 999999})
	must(t, err)
	if fmt.Sprint(have) != "[false true false]" {
		t.Fatalf("who has browsers (pending, active with 9, unknown): %v", have)
	}

	must(t, s.DeletePushSubscriptions(ctx, a.ID))
	if got, _ := s.PushSubscriptions(ctx, a.ID); len(got) != 0 {
		t.Fatalf("after deleting all: %v", endpoints(got))
	}

	// Leaving ends them; a bounce keeps them (unused while not active).
	for _, tc := range []struct {
		email string
		end   func(email string) error
		kept  bool
	}{
		{"leave@x.io", func(e string) error { return errOnly(s.Unsubscribe(ctx, e)) }, false},
		{"untick@x.io", func(e string) error {
			return errOnly(s.SetPreferences(ctx, e, store.Preferences{}, outbox.Cancel{}))
		}, false},
		{"lastone@x.io", func(e string) error {
			if err := errOnly(s.LeaveTopic(ctx, e, "digest", outbox.Cancel{})); err != nil {
				return err
			}
			return errOnly(s.LeaveTopic(ctx, e, "updates", outbox.Cancel{}))
		}, false},
		{"bounce@x.io", func(e string) error { return s.MarkBounced(ctx, e) }, true},
	} {
		sub, err := s.Subscribe(ctx, store.SubscribeRequest{Email: tc.email, Activate: true})
		must(t, err)
		must(t, s.AddPushSubscription(ctx, sub.ID, browser(1)))
		must(t, tc.end(tc.email))
		got, err := s.PushSubscriptions(ctx, sub.ID)
		must(t, err)
		if kept := len(got) == 1; kept != tc.kept {
			t.Errorf("%s: browsers kept %v, want %v", tc.email, kept, tc.kept)
		}
	}
}
