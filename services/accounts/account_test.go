package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

func TestCheckPassword(t *testing.T) {
	cases := []struct {
		pw, why string
	}{
		{"short pw", "too short"},
		{"elevenchars", "too short"},
		{strings.Repeat("x", MaxPassword+1), "too long"},
		{"password1234", "common password"}, // issue #41: passed the length floor and the old list
		{"qazwsxedcrfv", "common password"},
		{"QAZWSXEDCRFV", "common password"},
		{"zxcvbnm,./asdfg", "keyboard"},
		{"1qaz2wsx3edc", "guess"},
		{"abcdefghijklmnop", "sequences"},
		{strings.Repeat("y", MaxPassword), "repeats"},
		{"ann@example.org", "e-mail"},
		{"Ann@Example.org", "e-mail"},
		{"example.org2026", "your address"}, // the address's words
		{"TheDailyGazette!", "newsletter"},  // the newsletter's name
		{"gazettegazette", "repeats"},
		{strings.Repeat("1qaz2wsx", 16), "guess"}, // only the first 64 characters are judged: they are guessable
	}
	for _, c := range cases {
		err := CheckPassword(c.pw, "ann@example.org", "The Daily Gazette")
		var pe *PasswordError
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), c.why) && !(c.why == "e-mail" && strings.Contains(pe.Error(), "address")) {
			t.Errorf("CheckPassword(%q) = %v, want a refusal (%s)", c.pw, err, c.why)
		}
		if pe != nil && strings.Contains(pe.Error(), c.pw) {
			t.Errorf("the refusal of %q repeats the password: %v", c.pw, err)
		}
	}
	for _, ok := range []string{"correct horse battery staple", "vintage lantern quokka", "jäätelö on hyvää ruokaa", "日本語のパスワードはこれです", "Ux7#kq9!Vm2$", "vintage lantern quokka " + strings.Repeat("a", 100)} {
		if err := CheckPassword(ok, "ann@example.org", "The Daily Gazette"); err != nil {
			t.Errorf("CheckPassword(%q) = %v, want nil (no composition rules)", ok, err)
		}
	}
}

func TestHashPassword(t *testing.T) {
	ctx := context.Background()
	h, err := Passwords.Hash(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q: not argon2id with its parameters", h)
	}
	if again, _ := Passwords.Hash(ctx, "correct horse battery"); h == again {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	right, err1 := Passwords.Verify(ctx, h, "correct horse battery")
	wrong, err2 := Passwords.Verify(ctx, h, "correct horse batterY")
	if !right || wrong || err1 != nil || err2 != nil {
		t.Fatal("verify does not tell the password from another")
	}
	for _, bad := range []string{"", "$argon2id$v=19$m=0,t=2,p=1$AAAA$AAAA", "$argon2i$v=19$m=19456,t=2,p=1$AAAA$AAAA", "plain"} {
		if ok, _ := Passwords.Verify(ctx, bad, ""); ok {
			t.Fatalf("an unreadable hash %q matched", bad)
		}
	}
}

// TestTOTPRFC6238: the library's codes are RFC 6238's (Appendix B, SHA-1,
// the 8-digit vectors' last 6 digits: HOTP truncates modulo 10^digits).
func TestTOTPRFC6238(t *testing.T) {
	secret := "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" // base32 of "12345678901234567890"
	for _, v := range []struct {
		unix int64
		code string
	}{{59, "94287082"}, {1111111109, "07081804"}, {1111111111, "14050471"}, {1234567890, "89005924"}, {2000000000, "69279037"}, {20000000000, "65353130"}} {
		got, err := totp.GenerateCodeCustom(secret, time.Unix(v.unix, 0), totp.ValidateOpts{Period: 30, Digits: otp.DigitsEight, Algorithm: otp.AlgorithmSHA1})
		if err != nil || got != v.code {
			t.Errorf("T=%d: %q %v, want %s", v.unix, got, err, v.code)
		}
		six, _ := Code(secret, time.Unix(v.unix, 0))
		if six != v.code[2:] {
			t.Errorf("T=%d: six digits %q, want %s", v.unix, six, v.code[2:])
		}
	}
}

func TestCheckCode(t *testing.T) {
	secret, uri, err := NewTOTP("ann@example.org")
	if err != nil || !strings.HasPrefix(uri, "otpauth://totp/Newsletter:ann@example.org?") || !strings.Contains(uri, "secret="+secret) {
		t.Fatalf("NewTOTP: %q %q %v", secret, uri, err)
	}
	if again := TOTPURI("", "ann@example.org", secret); again != uri {
		t.Fatalf("TOTPURI: %q, want %q", again, uri)
	}
	now := time.Unix(1_800_000_015, 0)
	for d, want := range map[time.Duration]bool{0: true, -30 * time.Second: true, 30 * time.Second: true, -60 * time.Second: false, 90 * time.Second: false} {
		code, _ := Code(secret, now.Add(d))
		step, ok := CheckCode(secret, code, now)
		if ok != want || ok && step != Step(now.Add(d)) {
			t.Errorf("a code %s off: step %d ok %v, want ok %v", d, step, ok, want)
		}
	}
	for _, bad := range []string{"", "12345", "1234567", "abcdef"} {
		if _, ok := CheckCode(secret, bad, now); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRecoveryCodes(t *testing.T) {
	codes, hashes := NewRecoveryCodes()
	if len(codes) != RecoveryCodes || len(hashes) != RecoveryCodes {
		t.Fatalf("%d codes, %d hashes", len(codes), len(hashes))
	}
	seen := map[string]bool{}
	for i, c := range codes {
		if len(c) != 19 || !LooksLikeRecoveryCode(c) || seen[c] {
			t.Fatalf("code %q", c)
		}
		seen[c] = true
		typed := strings.ToLower(strings.ReplaceAll(c, "-", " "))
		if HashRecoveryCode(typed) != hashes[i] {
			t.Fatalf("the code typed in lower case with spaces hashes differently")
		}
	}
	if LooksLikeRecoveryCode("123456") {
		t.Fatal("a TOTP code taken for a recovery code")
	}
}

func TestCheckInvite(t *testing.T) {
	if e, r, err := CheckInvite("Ann@Example.ORG", "editor"); err != nil || e != "Ann@example.org" && e != "ann@example.org" || r != "editor" {
		t.Fatalf("CheckInvite: %q %q %v", e, r, err)
	}
	for _, c := range [][2]string{{"", "viewer"}, {"not an address", "viewer"}, {"ann@example.org", "root"}, {"ann@example.org", ""}} {
		var ie *InputError
		if _, _, err := CheckInvite(c[0], c[1]); !errors.As(err, &ie) {
			t.Errorf("CheckInvite(%q, %q) = %v, want an InputError", c[0], c[1], err)
		}
	}
	tok, hash := NewInviteToken()
	if len(tok) != 43 || HashInviteToken(tok) != hash || hash == tok {
		t.Fatalf("invite token %q hash %q", tok, hash)
	}
}
