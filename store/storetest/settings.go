package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// testSettings: none saved is version 0; a save over the version read
// answers the next one; a save over an older version writes nothing.
func testSettings(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	if got, err := s.Settings(ctx); err != nil || !reflect.DeepEqual(got, store.Settings{}) {
		t.Fatalf("an empty store: %+v %v", got, err)
	}
	if v, err := s.SettingsVersion(ctx); err != nil || v != 0 {
		t.Fatalf("an empty store's version: %d %v", v, err)
	}
	want := store.Settings{Name: "Café", Description: "d", From: "a@example.com", ReplyTo: "b@example.com",
		PostalAddress: "1 Street\nTown", LogoURL: "https://example.com/l.png", Accent: "#112233",
		ConfirmedHeading: "Welcome aboard", ConfirmedText: "Line one\n\nLine two", ConfirmedURL: "https://example.com/start",
		TestRecipients: []string{"team@example.com", "ed@example.com"}}
	saved, err := s.SaveSettings(ctx, want, 0)
	want.Version = 1
	if err != nil || !reflect.DeepEqual(saved, want) {
		t.Fatalf("save: %+v %v", saved, err)
	}
	if _, err := s.SaveSettings(ctx, store.Settings{Name: "Other"}, 0); !errors.Is(err, store.ErrSettingsStale) {
		t.Fatalf("a save over version 0: %v", err)
	}
	if got, err := s.Settings(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a stale save: %+v %v", got, err)
	}
	next := want
	next.Name, next.LogoURL, next.TestRecipients = "Renamed", "", []string{}
	if saved, err := s.SaveSettings(ctx, next, 1); err != nil || saved.Version != 2 {
		t.Fatalf("second save: %+v %v", saved, err)
	}
	next.Version = 2
	if got, err := s.Settings(ctx); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("read back %+v %v, want %+v", got, err, next)
	}
	if v, err := s.SettingsVersion(ctx); err != nil || v != 2 {
		t.Fatalf("version %d %v", v, err)
	}
}
