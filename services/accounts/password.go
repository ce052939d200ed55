package accounts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn"
	"github.com/trustelem/zxcvbn/match"
	"golang.org/x/crypto/argon2"
)

// The length rule of NIST SP 800-63B §3.1.1.2: at least MinPassword
// characters (the guide's floor for a password that is the only factor is
// 15; with a second factor 8; 12 is the issue's), at most MaxPassword so a
// hash is never asked to chew megabytes. Nothing else about the
// characters is required: composition rules make passwords worse.
const (
	MinPassword = 12
	MaxPassword = 128
)

// PasswordError is a password the rules refuse: its message says why, to
// be shown on the form (it never repeats the password).
type PasswordError struct{ Reason string }

func (e *PasswordError) Error() string { return e.Reason }

// MinStrength is the least zxcvbn score a new password needs: 3 means
// zxcvbn estimates at least 10^8 guesses, out of reach of an online
// attack and costly offline against argon2id; 2 and below are the
// passwords attackers' lists and rules find first (password1234 is 1).
const MinStrength = 3

// CheckPassword is the rule for a new password of the account with the
// address email, in the console of the newsletter newsletterName: nil,
// or a *PasswordError that says why. Length first (cheap, and it bounds
// the estimator's work), then zxcvbn's estimate of how many guesses it
// takes, with the address and the newsletter's name as words an attacker
// tries first. That the new password differs from the current one is
// the caller's to check (a hash: Hasher.Verify).
func CheckPassword(pw, email, newsletterName string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case !utf8.ValidString(pw):
		return &PasswordError{"the password is not valid UTF-8"}
	case n < MinPassword:
		return &PasswordError{fmt.Sprintf("the password is too short: at least %d characters (a few words make a good one)", MinPassword)}
	case n > MaxPassword:
		return &PasswordError{fmt.Sprintf("the password is too long: at most %d characters", MaxPassword)}
	case strings.EqualFold(strings.TrimSpace(pw), strings.TrimSpace(email)):
		return &PasswordError{"the password must not be your e-mail address"}
	}
	res := zxcvbn.PasswordStrength(asciiStandIn(firstRunes(pw, estimatedRunes)), userInputs(email, newsletterName))
	if res.Score >= MinStrength {
		return nil
	}
	return &PasswordError{"the password is too easy to guess: it is made of " + weakParts(res.Sequence) +
		", which attackers try first; add a few words that do not belong together"}
}

// estimatedRunes is how much of a password zxcvbn judges: its work grows
// faster than the length (190 ms of CPU for 128 adversarial characters,
// 15 ms for 64, on the machine that measured it), and 64 characters that are not guessable make
// a strong password whatever follows, while 64 that are make a guessable
// start that nothing after redeems.
const estimatedRunes = 64

// firstRunes is the first n characters of s.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// asciiStandIn is pw with each non-ASCII character replaced by a letter
// chosen by the character (the same one for the same character): zxcvbn
// v1.0.1 indexes a password by bytes and, on many non-ASCII passwords,
// answers 0 guesses ("jäätelö on hyvää ruokaa" scores 0). The stand-in
// keeps the length in characters, the repeats and the ASCII words; it
// can only make the estimate lower (a rare accidental word), never
// higher.
func asciiStandIn(pw string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			return r
		}
		return 'a' + r%26
	}, pw)
}

// userInputs are the words of this account an attacker tries first: the
// address, its parts, and the newsletter's name and its words.
func userInputs(email, newsletterName string) []string {
	local, domain, _ := strings.Cut(strings.ToLower(email), "@")
	in := []string{asciiStandIn(strings.ToLower(email)), local, domain}
	in = append(in, strings.FieldsFunc(local+" "+domain, func(r rune) bool { return r == '.' || r == '-' || r == '_' || r == '+' || r == ' ' })...)
	if name := strings.ToLower(strings.TrimSpace(newsletterName)); name != "" {
		in = append(in, name, strings.ReplaceAll(name, " ", ""))
		in = append(in, strings.Fields(name)...)
	}
	return in
}

// weakParts names, in the order they appear, the kinds of guessable
// parts zxcvbn found in a password (never the password's text).
func weakParts(seq []*match.Match) string {
	var parts []string
	seen := map[string]bool{}
	for _, m := range seq {
		var what string
		switch {
		case m.Pattern == "dictionary" && m.DictionaryName == "user_inputs":
			what = "your address or the newsletter's name"
		case m.Pattern == "dictionary" && m.DictionaryName == "passwords":
			what = "a common password"
		case m.Pattern == "dictionary" && strings.HasSuffix(m.DictionaryName, "names"):
			what = "names"
		case m.Pattern == "dictionary":
			what = "common words"
		case m.Pattern == "spatial":
			what = "keyboard patterns"
		case m.Pattern == "repeat":
			what = "repeats"
		case m.Pattern == "sequence":
			what = "sequences such as abc or 1234"
		case m.Pattern == "date" || m.Pattern == "regex":
			what = "dates or years"
		default:
			continue // brute force: the random part, which is fine
		}
		if !seen[what] {
			seen[what] = true
			parts = append(parts, what)
		}
	}
	if len(parts) == 0 {
		return "too few unpredictable characters"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// The argon2id parameters: OWASP's first choice (19 MiB, 2 passes, one
// lane), about 30 ms on a server core. They are written into each hash,
// so raising them later leaves the old hashes readable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// hashPassword is pw's argon2id hash in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$hash), with a fresh random salt. Only
// a Hasher calls it: a hash outside its slots is memory nobody bounds.
func hashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails (Go 1.24+)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// errBadHash is a stored hash this package cannot read.
var errBadHash = errors.New("not an argon2id hash")

// verifyPassword reports whether pw is the password encoded hashes (in
// constant time). An unreadable hash matches nothing. Only a Hasher
// calls it.
func verifyPassword(encoded, pw string) bool {
	ok, err := verify(encoded, pw)
	return err == nil && ok
}

func verify(encoded, pw string) (bool, error) {
	f := strings.Split(encoded, "$")
	if len(f) != 6 || f[1] != "argon2id" {
		return false, errBadHash
	}
	var v int
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(f[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false, errBadHash
	}
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 || m > 1<<22 || t > 100 {
		return false, errBadHash
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(f[4])
	want, err2 := b64.DecodeString(f[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is verified against when there is no account, so a wrong
// address costs as much as a wrong password (the same parameters, so the
// same time and memory) and the answer does not tell which addresses
// have accounts. It is written out rather than made at start-up so that
// no hash ever runs outside a Hasher's slots; nobody knows its password
// (it was made from a random one, thrown away).
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$v2n3V/AOpP/Q+XhYVTCoOQ$/NUa0Z1AroEfpgJ9Yaepvag8J0fGW4rzb2FjVIS7u3M"
