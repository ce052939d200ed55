package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	for _, p := range []Purpose{Confirm, Unsubscribe, Preferences} {
		sub, err := s.Verify(p, s.Sign(p, 42))
		if err != nil || sub != (Subject{ID: 42}) {
			t.Fatalf("%s round trip: %+v, %v", p, sub, err)
		}
	}
}

// TestTokenNamesNoAddress: the body is the purpose, the id, the expiry and
// the topic; nothing in a token says whose it is.
func TestTokenNamesNoAddress(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	body, _, _ := strings.Cut(s.SignTopic(Unsubscribe, 42, "digest"), ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || string(raw) != "unsubscribe\n42\n0\ndigest" {
		t.Fatalf("body %q, %v", raw, err)
	}
}

func TestPurposeBound(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	if _, err := s.Verify(Unsubscribe, s.Sign(Confirm, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("confirm token unsubscribed: %v", err)
	}
	if _, err := s.Verify(Confirm, s.Sign(Unsubscribe, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unsubscribe token confirmed: %v", err)
	}
}

func TestTamperAndKey(t *testing.T) {
	s := NewSigner([]byte("k"), time.Hour)
	tok := s.Sign(Confirm, 7)
	other := NewSigner([]byte("other"), time.Hour)
	for _, bad := range []string{"", "x", tok + "x", "x" + tok, "a.b", tok + ".", "." + tok} {
		if _, err := s.Verify(Confirm, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Verify(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := other.Verify(Confirm, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a token verified under another key: %v", err)
	}
}

// TestStrictSpelling: a signed link has one spelling. The last character
// of each part carries unused bits; a lenient decoder maps several
// characters to the same bytes, so a changed link still verified. Line
// breaks, which the decoder skips, do not pass either.
func TestStrictSpelling(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	s := NewSigner([]byte("k"), time.Hour)
	for _, tok := range []string{s.Sign(Unsubscribe, 42), s.SignTopic(Unsubscribe, 42, "digest"), s.Sign(Unsubscribe, 1234567)} {
		body, sum, _ := strings.Cut(tok, ".")
		variants := 0
		for _, part := range []struct{ body, sum bool }{{false, true}, {true, false}} {
			p := sum
			if part.body {
				p = body
			}
			if len(p)%4 == 0 {
				continue // no unused bits in a full group
			}
			last := strings.IndexByte(alphabet, p[len(p)-1])
			for low := 0; low < 4; low++ {
				c := last&^3 | low
				if c == last {
					continue
				}
				changed := p[:len(p)-1] + string(alphabet[c])
				forged := body + "." + changed
				if part.body {
					forged = changed + "." + sum
				}
				variants++
				if _, err := s.Verify(Unsubscribe, forged); !errors.Is(err, ErrInvalid) {
					t.Errorf("%q (last character of %q changed) verified: %v", forged, tok, err)
				}
			}
		}
		if variants == 0 {
			t.Fatalf("%q: no part with unused bits to change", tok)
		}
		for _, forged := range []string{body + "\n." + sum, body + "." + sum[:10] + "\r\n" + sum[10:]} {
			if _, err := s.Verify(Unsubscribe, forged); !errors.Is(err, ErrInvalid) {
				t.Errorf("%q (a line break added) verified: %v", forged, err)
			}
		}
	}
}

func TestExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := NewSigner([]byte("k"), time.Hour).WithClock(func() time.Time { return now })
	confirm, unsub := s.Sign(Confirm, 3), s.Sign(Unsubscribe, 3)
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
	tok := s.SignTopic(Unsubscribe, 5, "digest")
	if sub, err := s.Verify(Unsubscribe, tok); err != nil || sub != (Subject{ID: 5, Topic: "digest"}) {
		t.Fatalf("%+v %v", sub, err)
	}
	// The topic is signed: changing it breaks the token.
	body, sum, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "digest", "updates", 1))) + "." + sum
	if _, err := s.Verify(Unsubscribe, forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forged topic: %v", err)
	}
	// Purpose-bound: preferences, confirm and unsubscribe never stand in
	// for each other.
	pref := s.Sign(Preferences, 5)
	for _, c := range []struct {
		p   Purpose
		tok string
	}{{Confirm, pref}, {Unsubscribe, pref}, {Preferences, tok}, {Preferences, s.Sign(Confirm, 5)}} {
		if _, err := s.Verify(c.p, c.tok); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s accepted another purpose's token: %v", c.p, err)
		}
	}
}

// Tokens made by the release before ids (key "k"): the address inside,
// signed with the secret itself. Links like these sit in mails already
// delivered.
const (
	legacyUnsubscribeTopic = "dW5zdWJzY3JpYmUKem9lQGV4YW1wbGUuY29tCjAKZGlnZXN0.B148vPC-EgkbF5bSf4f-Z4UWPcHNXci7Qsxbo5C2eKM"
	legacyUnsubscribe      = "dW5zdWJzY3JpYmUKem9lQGV4YW1wbGUuY29tCjA.UJuKpxJ5Ao9AhUrL9TLPAinU6-paIKP0IhBB_UUzEh4"
	legacyPreferences      = "cHJlZmVyZW5jZXMKem9lQGV4YW1wbGUuY29tCjA.5ZSvwetf9pYdlGLN8TAoyuMsipq6U_4I4K2sy1jEuPY"
	legacyConfirm          = "Y29uZmlybQp6b2VAZXhhbXBsZS5jb20KNDEwMzA0OTYwMA.UKvytBQD1YobwtdFKFg0GfVCk60UwXefmG3d_qCIFjA" // expires 2100-01-08
)

// TestLegacyTokens: the links in mails sent before ids keep working, for
// their own purpose only, and stay as strict as the new ones (but a
// preferences link without an expiry is expired: PreferencesTTL).
func TestLegacyTokens(t *testing.T) {
	s := NewSigner([]byte("k"), 0)
	for _, c := range []struct {
		p    Purpose
		tok  string
		want Subject
	}{
		{Unsubscribe, legacyUnsubscribeTopic, Subject{Email: "zoe@example.com", Topic: "digest"}},
		{Unsubscribe, legacyUnsubscribe, Subject{Email: "zoe@example.com"}},
		{Preferences, legacyPreferences, Subject{Email: "zoe@example.com"}},
		{Confirm, legacyConfirm, Subject{Email: "zoe@example.com"}},
	} {
		sub, err := s.Verify(c.p, c.tok)
		if c.p == Preferences {
			// Issued without an expiry: expired now (PreferencesTTL), but
			// still naming whom to mail a fresh link to.
			if !errors.Is(err, ErrExpired) || sub != c.want {
				t.Errorf("%s %s: %+v %v, want it expired", c.p, c.tok, sub, err)
			}
		} else if err != nil || sub != c.want || !sub.Legacy() {
			t.Errorf("%s %s: %+v %v", c.p, c.tok, sub, err)
		}
		for _, other := range []Purpose{Confirm, Unsubscribe, Preferences} {
			if _, err := s.Verify(other, c.tok); other != c.p && !errors.Is(err, ErrInvalid) {
				t.Errorf("the legacy %s token passed as %s: %v", c.p, other, err)
			}
		}
		if _, err := NewSigner([]byte("other"), 0).Verify(c.p, c.tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("a legacy token verified under another key: %v", err)
		}
	}
	// The legacy confirmation still expires on its own date.
	after := s.WithClock(func() time.Time { return time.Date(2100, 1, 9, 0, 0, 0, 0, time.UTC) })
	if _, err := after.Verify(Confirm, legacyConfirm); !errors.Is(err, ErrExpired) {
		t.Fatalf("legacy confirmation after its expiry: %v", err)
	}
	// A new token is not a legacy one.
	if sub, _ := s.Verify(Unsubscribe, s.Sign(Unsubscribe, 9)); sub.Legacy() {
		t.Fatal("a new token reads as legacy")
	}
}

// TestIssueTokens: a link in an issue's mail names the issue inside the
// signed bytes; changing it, or spelling it another way, breaks the
// token, and tokens without one keep verifying as before.
func TestIssueTokens(t *testing.T) {
	s := NewSigner([]byte("k"), 0)
	for _, c := range []struct {
		p     Purpose
		topic string
	}{{Unsubscribe, "digest"}, {Preferences, ""}} {
		tok := s.SignIssue(c.p, 5, c.topic, 17)
		if sub, err := s.Verify(c.p, tok); err != nil || sub != (Subject{ID: 5, Topic: c.topic, Issue: 17}) {
			t.Fatalf("%s: %+v %v", c.p, sub, err)
		}
	}
	if s.SignIssue(Unsubscribe, 5, "digest", 0) != s.SignTopic(Unsubscribe, 5, "digest") {
		t.Fatal("a token of no issue is not the topic token")
	}
	sign := func(body string) string {
		return enc.EncodeToString([]byte(body)) + "." + enc.EncodeToString(mac(s.key, body))
	}
	if sub, err := s.Verify(Unsubscribe, sign("unsubscribe\n5\n0\ndigest\n17")); err != nil || sub.Issue != 17 {
		t.Fatalf("the layout SignIssue writes: %+v %v", sub, err)
	}
	for _, bad := range []string{"017", "0", "-3", "x", "", "17 ", "+17"} {
		if _, err := s.Verify(Unsubscribe, sign("unsubscribe\n5\n0\ndigest\n"+bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("issue %q verified: %v", bad, err)
		}
	}
	body, sum, _ := strings.Cut(s.SignIssue(Unsubscribe, 5, "digest", 17), ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "17", "18", 1))) + "." + sum
	if _, err := s.Verify(Unsubscribe, forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forged issue: %v", err)
	}
}

// TestPreferencesAndResubscribeExpire: a preferences link works for
// PreferencesTTL and a resubscribe token for ResubscribeTTL; past it
// Verify answers ErrExpired and still names the subscriber (and the
// topics of a resubscribe).
func TestPreferencesAndResubscribeExpire(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewSigner([]byte("k"), 0).WithClock(func() time.Time { return now })
	prefs, back := s.Sign(Preferences, 7), s.SignTopic(Resubscribe, 7, "digest,updates")
	at := func(d time.Duration) *Signer { return s.WithClock(func() time.Time { return now.Add(d) }) }
	if sub, err := at(PreferencesTTL-time.Minute).Verify(Preferences, prefs); err != nil || sub.ID != 7 {
		t.Fatalf("a preferences link within its life: %+v %v", sub, err)
	}
	if sub, err := at(PreferencesTTL+time.Minute).Verify(Preferences, prefs); !errors.Is(err, ErrExpired) || sub.ID != 7 {
		t.Fatalf("a preferences link past its life: %+v %v", sub, err)
	}
	if sub, err := at(ResubscribeTTL-time.Minute).Verify(Resubscribe, back); err != nil || sub.ID != 7 || sub.Topic != "digest,updates" {
		t.Fatalf("a resubscribe within its life: %+v %v", sub, err)
	}
	if _, err := at(ResubscribeTTL+time.Minute).Verify(Resubscribe, back); !errors.Is(err, ErrExpired) {
		t.Fatalf("a resubscribe past its life: %v", err)
	}
	if _, err := s.Verify(Unsubscribe, back); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a resubscribe token as an unsubscribe: %v", err)
	}
}

// TestUnsubscribeTokenBytesUnchanged: the token a mail carries is byte
// for byte the HMAC-SHA256 of its body under the derived key, as before
// the keyed hashes were reused (issue #48): links already sent keep
// verifying and a mail does not change.
func TestUnsubscribeTokenBytesUnchanged(t *testing.T) {
	secret := []byte("a-secret-of-the-service-0123456789")
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("newsletter token key v2"))
	key := m.Sum(nil)
	body := "unsubscribe\n42\n0"
	h := hmac.New(sha256.New, key)
	h.Write([]byte(body))
	want := base64.RawURLEncoding.EncodeToString([]byte(body)) + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	if got := NewSigner(secret, 0).Sign(Unsubscribe, 42); got != want {
		t.Fatalf("Sign(unsubscribe, 42) = %s, want %s", got, want)
	}
}

// BenchmarkSignUnsubscribe is the token every mail carries (issue #48).
func BenchmarkSignUnsubscribe(b *testing.B) {
	s := NewSigner([]byte("a-secret-of-the-service-0123456789"), 0)
	var id int64
	for b.Loop() {
		id++
		_ = s.Sign(Unsubscribe, id)
	}
}
