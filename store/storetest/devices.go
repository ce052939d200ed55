package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/newsletter/newsletter/store"
)

func deviceIDs(ds []store.Device) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// Devices: stored for an active subscriber only, the same token the same
// device (renewed, now the newest), capped by evicting the oldest, deleted
// one at a time (a second delete says there is none), gone with the
// subscription when the person leaves, in their personal data, and gone
// with an erasure.
func testDevices(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "app@x.io", Activate: true})
	must(t, err)
	pending, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "pending-app@x.io"})
	must(t, err)
	phone := func(n int) store.Device {
		return store.Device{Platform: store.PlatformFCM, Token: fmt.Sprintf("tok-%03d", n)}
	}
	if _, err := s.AddDevice(ctx, pending.ID, phone(1)); !errors.Is(err, store.ErrNotActive) {
		t.Fatalf("a pending subscriber's device: %v, want ErrNotActive", err)
	}
	if _, err := s.AddDevice(ctx, 999999, phone(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown id: %v, want ErrNotFound", err)
	}
	if have, err := s.HavePushSubscriptions(ctx, []int64{a.ID}); err != nil || have[0] {
		t.Fatalf("no device yet: %v %v", have, err)
	}
	first, err := s.AddDevice(ctx, a.ID, phone(1))
	must(t, err)
	// The push lane's question counts app installs as browsers.
	if have, err := s.HavePushSubscriptions(ctx, []int64{a.ID}); err != nil || !have[0] {
		t.Fatalf("a person with an app install has nothing to notify: %v %v", have, err)
	}
	if first.ID != store.DeviceID(store.PlatformFCM, "tok-001") || first.CreatedAt.IsZero() {
		t.Fatalf("stored %+v", first)
	}
	_, err = s.AddDevice(ctx, a.ID, store.Device{Platform: store.PlatformAPNs, Token: "tok-001"})
	must(t, err)
	_, err = s.AddDevice(ctx, a.ID, phone(1)) // the same token: renewed, now the newest
	must(t, err)
	got, err := s.DevicesOf(ctx, []int64{a.ID, pending.ID})
	must(t, err)
	if len(got[0]) != 2 || got[0][0].Platform != store.PlatformAPNs || got[0][1].ID != first.ID || got[0][1].Token != "tok-001" || len(got[1]) != 0 {
		t.Fatalf("devices %+v", got)
	}
	for i := 2; i <= store.MaxDevices; i++ { // eleven: the APNs one, the oldest, goes
		_, err := s.AddDevice(ctx, a.ID, phone(i))
		must(t, err)
	}
	got, _ = s.DevicesOf(ctx, []int64{a.ID})
	if len(got[0]) != store.MaxDevices || got[0][0].ID != first.ID {
		t.Fatalf("past the cap: %v, want %d with the renewed first one oldest", deviceIDs(got[0]), store.MaxDevices)
	}
	must(t, s.DeleteDevice(ctx, a.ID, first.ID))
	if err := s.DeleteDevice(ctx, a.ID, first.ID); !errors.Is(err, store.ErrNoDevice) {
		t.Fatalf("deleting it again: %v, want ErrNoDevice", err)
	}
	pd, err := s.PersonalData(ctx, "app@x.io")
	must(t, err)
	if len(pd.Devices) != store.MaxDevices-1 {
		t.Fatalf("personal data holds %d devices", len(pd.Devices))
	}
	must2(t)(s.Unsubscribe(ctx, "app@x.io"))
	if got, _ := s.DevicesOf(ctx, []int64{a.ID}); len(got[0]) != 0 {
		t.Fatalf("devices kept after leaving: %v", deviceIDs(got[0]))
	}
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "erase-app@x.io", Activate: true})
	must(t, err)
	_, err = s.AddDevice(ctx, b.ID, phone(1))
	must(t, err)
	must2(t)(s.Erase(ctx, "erase-app@x.io"))
	if got, _ := s.DevicesOf(ctx, []int64{b.ID}); len(got[0]) != 0 {
		t.Fatalf("devices kept after an erasure: %v", deviceIDs(got[0]))
	}
}

// DeviceMovesToNewestOwner: a token registered by a second person is
// theirs alone from then on (the first no longer lists it, nor is
// notified on it), and back again when the first registers it anew; a
// device the old owner deletes afterwards leaves the new owner's alone.
func testDeviceMovesToNewestOwner(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "seller@x.io", Activate: true})
	must(t, err)
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "buyer@x.io", Activate: true})
	must(t, err)
	sold := store.Device{Platform: store.PlatformAPNs, Token: "ab12cd34"}
	kept := store.Device{Platform: store.PlatformFCM, Token: "kept-by-seller"}
	for _, d := range []store.Device{sold, kept} {
		_, err := s.AddDevice(ctx, a.ID, d)
		must(t, err)
	}
	moved, err := s.AddDevice(ctx, b.ID, sold)
	must(t, err)
	got, err := s.DevicesOf(ctx, []int64{a.ID, b.ID})
	must(t, err)
	if len(got[0]) != 1 || got[0][0].Token != kept.Token || len(got[1]) != 1 || got[1][0].ID != moved.ID {
		t.Fatalf("after the buyer registered the token: seller %v, buyer %v; want it the buyer's alone", deviceIDs(got[0]), deviceIDs(got[1]))
	}
	if err := s.DeleteDevice(ctx, a.ID, moved.ID); !errors.Is(err, store.ErrNoDevice) {
		t.Fatalf("the seller deleting the moved device: %v, want ErrNoDevice (it is not theirs)", err)
	}
	_, err = s.AddDevice(ctx, a.ID, sold) // back to the first
	must(t, err)
	got, err = s.DevicesOf(ctx, []int64{a.ID, b.ID})
	must(t, err)
	if len(got[0]) != 2 || len(got[1]) != 0 {
		t.Fatalf("after the seller registered it again: seller %v, buyer %v", deviceIDs(got[0]), deviceIDs(got[1]))
	}
	must(t, s.DeleteDevice(ctx, a.ID, moved.ID))
	_, err = s.AddDevice(ctx, b.ID, sold)
	must(t, err)
	if got, _ := s.DevicesOf(ctx, []int64{b.ID}); len(got[0]) != 1 {
		t.Fatalf("registered again after a delete: %v", deviceIDs(got[0]))
	}
}
