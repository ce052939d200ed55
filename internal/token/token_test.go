package token

import (
	"errors"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	for _, p := range []Purpose{Confirm, Unsubscribe} {
		email, err := s.Verify(p, s.Sign(p, "a@b.co"))
		if err != nil || email != "a@b.co" {
			t.Fatalf("%s round trip: %q, %v", p, email, err)
		}
	}
}

func TestPurposeBound(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	if _, err := s.Verify(Unsubscribe, s.Sign(Confirm, "a@b.co")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("confirm token unsubscribed: %v", err)
	}
	if _, err := s.Verify(Confirm, s.Sign(Unsubscribe, "a@b.co")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unsubscribe token confirmed: %v", err)
	}
}

func TestTamperAndKey(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	tok := s.Sign(Confirm, "a@b.co")
	other := NewSigner([]byte("other"), time.Hour)
	for _, bad := range []string{"", "x", tok + "x", "x" + tok, "a.b"} {
		if _, err := s.Verify(Confirm, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Verify(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := other.Verify(Confirm, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a token verified under another key: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := NewSigner([]byte("k"), time.Hour).WithClock(func() time.Time { return now })
	confirm, unsub := s.Sign(Confirm, "a@b.co"), s.Sign(Unsubscribe, "a@b.co")
	later := s.WithClock(func() time.Time { return now.Add(2 * time.Hour) })
	if _, err := later.Verify(Confirm, confirm); !errors.Is(err, ErrExpired) {
		t.Fatalf("confirm token after its TTL: %v, want ErrExpired", err)
	}
	if _, err := s.WithClock(func() time.Time { return now.Add(24 * 365 * time.Hour) }).Verify(Unsubscribe, unsub); err != nil {
		t.Fatalf("unsubscribe token expired: %v", err)
	}
}
