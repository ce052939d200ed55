package token

import (
	"encoding/base64"
	"errors"
	"strings"
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

func TestTopicTokens(t *testing.T) {
	s := NewSigner([]byte("k"), 0)
	tok := s.SignTopic(Unsubscribe, "a@x.io", "digest")
	email, topic, err := s.VerifyTopic(Unsubscribe, tok)
	if err != nil || email != "a@x.io" || topic != "digest" {
		t.Fatalf("%q %q %v", email, topic, err)
	}
	// A token from before topics names none: every topic.
	if _, topic, err := s.VerifyTopic(Unsubscribe, s.Sign(Unsubscribe, "a@x.io")); err != nil || topic != "" {
		t.Fatalf("old token: %q %v", topic, err)
	}
	// The topic is signed: changing it breaks the token.
	body, mac, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "digest", "updates", 1))) + "." + mac
	if _, _, err := s.VerifyTopic(Unsubscribe, forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forged topic: %v", err)
	}
	// Purpose-bound: preferences, confirm and unsubscribe never stand in
	// for each other.
	pref := s.Sign(Preferences, "a@x.io")
	for _, c := range []struct {
		p   Purpose
		tok string
	}{{Confirm, pref}, {Unsubscribe, pref}, {Preferences, tok}, {Preferences, s.Sign(Confirm, "a@x.io")}} {
		if _, err := s.Verify(c.p, c.tok); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s accepted another purpose's token: %v", c.p, err)
		}
	}
	if email, err := s.Verify(Preferences, pref); err != nil || email != "a@x.io" {
		t.Fatalf("preferences: %q %v", email, err)
	}
}
