package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

func hook(id string, events ...string) store.Webhook {
	return store.Webhook{ID: id, URL: "https://hooks.example.com/" + id, Events: events, Secret: "whsec_c2VjcmV0LW9mLQ==" + id}
}

// testWebhooks: endpoints are kept with their secret, listed oldest first,
// refused when incomplete, taken or too many, and deleted.
func testWebhooks(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	if got, err := s.ListWebhooks(ctx); err != nil || len(got) != 0 {
		t.Fatalf("an empty store lists %v, %v", got, err)
	}
	first, err := s.AddWebhook(ctx, hook("wh1", "subscriber.confirmed", "issue.sent"))
	if err != nil || first.State != store.WebhookActive || first.Failures != 0 || first.CreatedAt.IsZero() {
		t.Fatalf("add: %+v %v", first, err)
	}
	if _, err := s.AddWebhook(ctx, hook("wh2", "subscriber.bounced")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWebhook(ctx, "wh1")
	if err != nil || got.URL != "https://hooks.example.com/wh1" || got.Secret != "whsec_c2VjcmV0LW9mLQ==wh1" ||
		!slices.Equal(got.Events, []string{"subscriber.confirmed", "issue.sent"}) || !got.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if !got.Wants("issue.sent") || got.Wants("subscriber.bounced") {
		t.Fatalf("wants: %+v", got)
	}
	list, err := s.ListWebhooks(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "wh1" || list[1].ID != "wh2" || list[1].Secret == "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := s.AddWebhook(ctx, hook("wh1", "issue.sent")); !errors.Is(err, store.ErrWebhookExists) {
		t.Fatalf("a taken id: %v", err)
	}
	for _, bad := range []store.Webhook{
		{URL: "https://x.example.com", Events: []string{"issue.sent"}, Secret: "s"},
		{ID: "a:b", URL: "https://x.example.com", Events: []string{"issue.sent"}, Secret: "s"},
		{ID: "nourl", Events: []string{"issue.sent"}, Secret: "s"},
		{ID: "noevents", URL: "https://x.example.com", Secret: "s"},
		{ID: "nosecret", URL: "https://x.example.com", Events: []string{"issue.sent"}},
		{ID: "comma", URL: "https://x.example.com", Events: []string{"a,b"}, Secret: "s"},
	} {
		if _, err := s.AddWebhook(ctx, bad); err == nil {
			t.Errorf("stored an incomplete endpoint %+v", bad)
		}
	}
	if list, _ := s.ListWebhooks(ctx); len(list) != 2 {
		t.Fatalf("refused endpoints were stored: %+v", list)
	}
	if err := s.DeleteWebhook(ctx, "wh1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWebhook(ctx, "wh1"); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := s.DeleteWebhook(ctx, "wh1"); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	for name, op := range map[string]func() error{
		"delivered": func() error { return s.WebhookDelivered(ctx, "wh1") },
		"failed":    func() error { _, err := s.WebhookFailed(ctx, "wh1", store.WebhookPolicy{}); return err },
		"disable":   func() error { _, err := s.DisableWebhook(ctx, "wh1"); return err },
		"enable":    func() error { _, err := s.EnableWebhook(ctx, "wh1"); return err },
	} {
		if err := op(); !errors.Is(err, store.ErrWebhookNotFound) {
			t.Errorf("%s on a deleted endpoint: %v", name, err)
		}
	}
	if _, err := s.GetWebhook(ctx, "wh1"); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatal("a change to a deleted endpoint brought it back")
	}
	// At most MaxWebhooks, however many ask at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	full := 0
	for i := range store.MaxWebhooks + 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AddWebhook(ctx, hook(fmt.Sprintf("many%d", i), "issue.sent"))
			if errors.Is(err, store.ErrTooManyWebhooks) {
				mu.Lock()
				full++
				mu.Unlock()
			} else if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if list, _ := s.ListWebhooks(ctx); len(list) != store.MaxWebhooks || full != 6 {
		t.Fatalf("%d endpoints stored, %d refused: want %d and 6", len(list), full, store.MaxWebhooks)
	}
}

// testWebhookFailures: failures in a row are counted and start again at a
// delivery; an endpoint is disabled only when it has failed often enough
// for long enough, stays so (counting nothing more), and is active again
// when enabled.
func testWebhookFailures(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	must2(t)(s.AddWebhook(ctx, hook("flaky", "issue.sent")))
	often := store.WebhookPolicy{DisableAfter: time.Hour, MinFailures: 3}
	for i := 1; i <= 5; i++ {
		w, err := s.WebhookFailed(ctx, "flaky", often)
		if err != nil || w.Failures != i || w.FailingSince.IsZero() || w.State != store.WebhookActive {
			t.Fatalf("failure %d within the hour: %+v %v", i, w, err)
		}
	}
	must(t, s.WebhookDelivered(ctx, "flaky"))
	if w, _ := s.GetWebhook(ctx, "flaky"); w.Failures != 0 || !w.FailingSince.IsZero() || w.State != store.WebhookActive {
		t.Fatalf("after a delivery: %+v", w)
	}
	// Long enough, not yet often enough; then often enough.
	long := store.WebhookPolicy{DisableAfter: time.Millisecond, MinFailures: 3}
	first, err := s.WebhookFailed(ctx, "flaky", long)
	if err != nil || first.State != store.WebhookActive {
		t.Fatalf("first failure: %+v %v", first, err)
	}
	poll.Until(t, 5*time.Second, func() error {
		w, err := s.WebhookFailed(ctx, "flaky", long)
		switch {
		case err != nil:
			return err
		case w.State == store.WebhookDisabled && w.Failures < 3:
			return fmt.Errorf("disabled after %d failures, want at least 3: %+v", w.Failures, w)
		case w.State != store.WebhookDisabled:
			return fmt.Errorf("still %s after %d failures since %s", w.State, w.Failures, w.FailingSince)
		}
		return nil
	})
	w, _ := s.GetWebhook(ctx, "flaky")
	if w.DisabledAt.IsZero() || !w.FailingSince.Equal(first.FailingSince) {
		t.Fatalf("disabled: %+v, failing since %s", w, first.FailingSince)
	}
	again, err := s.WebhookFailed(ctx, "flaky", long)
	if err != nil || again.Failures != w.Failures || again.State != store.WebhookDisabled {
		t.Fatalf("a disabled endpoint counted a failure: %+v %v", again, err)
	}
	if list, _ := s.ListWebhooks(ctx); len(list) != 1 || list[0].State != store.WebhookDisabled || list[0].Wants("issue.sent") {
		t.Fatalf("the list does not show it disabled: %+v", list)
	}
	on, err := s.EnableWebhook(ctx, "flaky")
	if err != nil || on.State != store.WebhookActive || on.Failures != 0 || !on.FailingSince.IsZero() || !on.DisabledAt.IsZero() {
		t.Fatalf("enable: %+v %v", on, err)
	}
	off, err := s.DisableWebhook(ctx, "flaky")
	if err != nil || off.State != store.WebhookDisabled || off.DisabledAt.IsZero() {
		t.Fatalf("disable (410 Gone): %+v %v", off, err)
	}
}
