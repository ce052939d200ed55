package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// Channel choices: a topic has e-mail and push until the person chooses;
// a choice is kept per topic (in the channels' own order, none allowed);
// read for many people at once, those who never chose reading as nil;
// an unknown channel or person is refused; leaving and erasure forget
// them.
func testChannels(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "ch@x.io", Activate: true})
	must(t, err)
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "ch2@x.io", Activate: true})
	must(t, err)
	if (store.Channels(nil)).Wants("updates", store.ChannelSMS) || !(store.Channels(nil)).Wants("updates", store.ChannelEmail) {
		t.Fatal("the defaults are not e-mail and push without SMS")
	}
	if err := s.SetChannels(ctx, a.ID, "updates", []string{"fax"}); err == nil {
		t.Fatal("an unknown channel was stored")
	}
	if err := s.SetChannels(ctx, 999999, "updates", []string{store.ChannelSMS}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown person: %v", err)
	}
	must(t, s.SetChannels(ctx, a.ID, "updates", []string{store.ChannelSMS, store.ChannelEmail}))
	must(t, s.SetChannels(ctx, a.ID, "digest", nil))
	got, err := s.ChannelsOf(ctx, []int64{a.ID, b.ID, 0})
	must(t, err)
	if !slices.Equal(got[0]["updates"], []string{store.ChannelEmail, store.ChannelSMS}) || got[0]["digest"] == nil || len(got[0]["digest"]) != 0 || got[1] != nil {
		t.Fatalf("choices %+v", got)
	}
	if !got[0].Wants("updates", store.ChannelSMS) || got[0].Wants("updates", store.ChannelPush) || got[0].Wants("digest", store.ChannelEmail) || !got[0].Wants("other", store.ChannelPush) {
		t.Fatalf("Wants reads %+v wrong", got[0])
	}
	pd, err := s.PersonalData(ctx, "ch@x.io")
	must(t, err)
	if len(pd.Channels) != 2 {
		t.Fatalf("personal data's channels: %+v", pd.Channels)
	}
	must2(t)(s.Unsubscribe(ctx, "ch@x.io"))
	if got, _ := s.ChannelsOf(ctx, []int64{a.ID}); got[0] != nil {
		t.Fatalf("choices kept after leaving: %+v", got[0])
	}
	must(t, s.SetChannels(ctx, b.ID, "updates", []string{store.ChannelPush}))
	must2(t)(s.Erase(ctx, "ch2@x.io"))
	if got, _ := s.ChannelsOf(ctx, []int64{b.ID}); got[0] != nil {
		t.Fatalf("choices kept after an erasure: %+v", got[0])
	}
}
