package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// Phones: a number for an active subscriber only, replaced by the next,
// with its consent; the number's state is the number's (a STOP holds for
// whoever gives it, until START); deleted, gone when the person leaves or
// is erased, in their personal data.
func testPhones(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "sms@x.io", Activate: true})
	must(t, err)
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "sms2@x.io", Activate: true})
	must(t, err)
	pending, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "pending-sms@x.io"})
	must(t, err)
	if _, err := s.SetPhone(ctx, pending.ID, "+447400123456", "app"); !errors.Is(err, store.ErrNotActive) {
		t.Fatalf("a pending subscriber's phone: %v, want ErrNotActive", err)
	}
	if _, err := s.SetPhone(ctx, 999999, "+447400123456", "app"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.SetPhone(ctx, a.ID, "07400 123456", "app"); err == nil {
		t.Fatal("a number not in E.164 was stored")
	}
	p, err := s.SetPhone(ctx, a.ID, "+447400123456", "signup form")
	must(t, err)
	if p.Number != "+447400123456" || p.Source != "signup form" || p.ConsentAt.IsZero() || p.State != store.NumberOn {
		t.Fatalf("stored %+v", p)
	}
	got, err := s.PhonesOf(ctx, []int64{a.ID, b.ID, pending.ID})
	must(t, err)
	if got[0] != p || got[1].Number != "" || got[2].Number != "" {
		t.Fatalf("phones %+v", got)
	}
	// STOP from the phone: stopped for every person who gives it.
	must(t, s.SetNumberState(ctx, "+447400123456", store.NumberStopped))
	_, err = s.SetPhone(ctx, b.ID, "+447400123456", "app")
	must(t, err)
	got, _ = s.PhonesOf(ctx, []int64{a.ID, b.ID})
	if got[0].State != store.NumberStopped || got[1].State != store.NumberStopped {
		t.Fatalf("after STOP: %+v", got)
	}
	if err := s.SetNumberState(ctx, "+447400123456", "paused"); err == nil {
		t.Fatal("an unknown state was stored")
	}
	must(t, s.SetNumberState(ctx, "+447400123456", store.NumberOn)) // START
	got, _ = s.PhonesOf(ctx, []int64{a.ID})
	if got[0].State != store.NumberOn {
		t.Fatalf("after START: %+v", got[0])
	}
	// A new number replaces the old; a retired number says so.
	_, err = s.SetPhone(ctx, a.ID, "+447700900123", "preferences")
	must(t, err)
	must(t, s.SetNumberState(ctx, "+447700900123", store.NumberRetired))
	got, _ = s.PhonesOf(ctx, []int64{a.ID})
	if got[0].Number != "+447700900123" || got[0].Source != "preferences" || got[0].State != store.NumberRetired {
		t.Fatalf("replaced: %+v", got[0])
	}
	pd, err := s.PersonalData(ctx, "sms@x.io")
	must(t, err)
	if pd.Phone == nil || pd.Phone.Number != "+447700900123" {
		t.Fatalf("personal data's phone: %+v", pd.Phone)
	}
	must(t, s.DeletePhone(ctx, a.ID))
	if err := s.DeletePhone(ctx, a.ID); !errors.Is(err, store.ErrNoPhone) {
		t.Fatalf("deleting it again: %v, want ErrNoPhone", err)
	}
	must2(t)(s.Unsubscribe(ctx, "sms2@x.io"))
	if got, _ := s.PhonesOf(ctx, []int64{b.ID}); got[0].Number != "" {
		t.Fatalf("a phone kept after leaving: %+v", got[0])
	}
	c, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "erase-sms@x.io", Activate: true})
	must(t, err)
	_, err = s.SetPhone(ctx, c.ID, "+447400123999", "app")
	must(t, err)
	must2(t)(s.Erase(ctx, "erase-sms@x.io"))
	if got, _ := s.PhonesOf(ctx, []int64{c.ID}); got[0].Number != "" {
		t.Fatalf("a phone kept after an erasure: %+v", got[0])
	}
}

// A number's texted code: kept with the number, at most one a minute;
// it is checked only once the gateway took its text (before that a try
// is neither checked nor counted); the right code gives the number and
// the SID of the message that carried it, once; wrong tries are counted
// and the last one spends the code.
func testPhoneCodes(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "code@x.io", Activate: true})
	must(t, err)
	if _, _, err := s.CheckPhoneCode(ctx, a.ID, "123456"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("no code sent: %v", err)
	}
	must(t, s.StartPhoneCode(ctx, a.ID, "+447400123456", "123456"))
	if n, err := s.PendingPhoneCode(ctx, a.ID); err != nil || n != "+447400123456" {
		t.Fatalf("pending: %q %v", n, err)
	}
	if err := s.StartPhoneCode(ctx, a.ID, "+447400123457", "654321"); !errors.Is(err, store.ErrCodeTooSoon) {
		t.Fatalf("a second code within the minute: %v", err)
	}
	for range store.PhoneCodeTries + 1 {
		if _, _, err := s.CheckPhoneCode(ctx, a.ID, "123456"); !errors.Is(err, store.ErrCodeNotSent) {
			t.Fatalf("the right code before its text went out: %v", err)
		}
	}
	if err := s.PhoneCodeSent(ctx, a.ID, "+447400123456", "999999", "SMother"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("another code's text: %v", err)
	}
	if err := s.PhoneCodeSent(ctx, a.ID, "+447400123457", "123456", "SMother"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("a text to another number: %v", err)
	}
	must(t, s.PhoneCodeSent(ctx, a.ID, "+447400123456", "123456", "SM123"))
	if _, _, err := s.CheckPhoneCode(ctx, a.ID, "000000"); !errors.Is(err, store.ErrWrongCode) {
		t.Fatalf("a wrong code: %v", err)
	}
	n, sid, err := s.CheckPhoneCode(ctx, a.ID, "123456")
	if err != nil || n != "+447400123456" || sid != "SM123" {
		t.Fatalf("the right code: %q %q %v", n, sid, err)
	}
	if _, _, err := s.CheckPhoneCode(ctx, a.ID, "123456"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("a code used twice: %v", err)
	}
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "guess@x.io", Activate: true})
	must(t, err)
	must(t, s.StartPhoneCode(ctx, b.ID, "+447400123458", "111111"))
	must(t, s.PhoneCodeSent(ctx, b.ID, "+447400123458", "111111", "SM456"))
	for i := 1; i < store.PhoneCodeTries; i++ {
		if _, _, err := s.CheckPhoneCode(ctx, b.ID, "222222"); !errors.Is(err, store.ErrWrongCode) {
			t.Fatalf("wrong try %d: %v", i, err)
		}
	}
	if _, _, err := s.CheckPhoneCode(ctx, b.ID, "222222"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("the last wrong try: %v, want the code spent", err)
	}
	if _, _, err := s.CheckPhoneCode(ctx, b.ID, "111111"); !errors.Is(err, store.ErrNoCode) {
		t.Fatalf("the right code after the tries were spent: %v", err)
	}
}

// A gateway callback acted on is remembered for its window, apart from
// the other callbacks of the same message.
func testSMSCallbacks(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	seen := func(key string) bool {
		t.Helper()
		ok, err := s.SMSCallbackSeen(ctx, key)
		must(t, err)
		return ok
	}
	if seen("SM1:stopped") {
		t.Fatal("a callback never acted on is seen")
	}
	must(t, s.RememberSMSCallback(ctx, "SM1:stopped", time.Hour))
	if !seen("SM1:stopped") || seen("SM1:on") || seen("SM2:stopped") {
		t.Fatalf("remembered: %v; another state %v, another message %v", seen("SM1:stopped"), seen("SM1:on"), seen("SM2:stopped"))
	}
}
