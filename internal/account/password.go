package account

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

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

// commonPasswords are the 10,000 most common passwords, one a line:
// the first 10,000 lines of data/passwords.txt of
// github.com/trustelem/zxcvbn v1.0.1 (MIT licence), the Go port of
// Dropbox's zxcvbn, whose list is ordered by frequency in leaked
// password sets. Most are shorter than MinPassword and already refused by
// length; the list catches the long ones ("qazwsxedcrfv",
// "administrator", "123456789987654321").
//
//go:embed common-passwords.txt
var commonPasswords []byte

var (
	commonOnce sync.Once
	common     map[string]bool
)

// IsCommon reports whether pw, in lower case, is on the list.
func IsCommon(pw string) bool {
	commonOnce.Do(func() {
		common = make(map[string]bool, 10000)
		sc := bufio.NewScanner(bytes.NewReader(commonPasswords))
		for sc.Scan() {
			if w := strings.TrimSpace(sc.Text()); w != "" {
				common[strings.ToLower(w)] = true
			}
		}
	})
	return common[strings.ToLower(pw)]
}

// CommonCount is how many passwords the list holds (for tests and docs).
func CommonCount() int {
	IsCommon("")
	return len(common)
}

// PasswordError is a password the rules refuse: its message says why, to
// be shown on the form (it never repeats the password).
type PasswordError struct{ Reason string }

func (e *PasswordError) Error() string { return e.Reason }

// CheckPassword is the rule for a new password of the account with the
// address email: nil, or a *PasswordError. currentHash, when not empty,
// is the account's current password's hash: the new one must differ.
func CheckPassword(pw, email, currentHash string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case !utf8.ValidString(pw):
		return &PasswordError{"the password is not valid UTF-8"}
	case n < MinPassword:
		return &PasswordError{fmt.Sprintf("the password is too short: at least %d characters (a few words make a good one)", MinPassword)}
	case n > MaxPassword:
		return &PasswordError{fmt.Sprintf("the password is too long: at most %d characters", MaxPassword)}
	case IsCommon(pw):
		return &PasswordError{"this password is on a list of common passwords that attackers try first; choose another"}
	case strings.EqualFold(strings.TrimSpace(pw), strings.TrimSpace(email)):
		return &PasswordError{"the password must not be your e-mail address"}
	case currentHash != "" && VerifyPassword(currentHash, pw):
		return &PasswordError{"the new password is your current one; choose another"}
	}
	return nil
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

// HashPassword is pw's argon2id hash in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$hash), with a fresh random salt.
func HashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails (Go 1.24+)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// errBadHash is a stored hash this package cannot read.
var errBadHash = errors.New("not an argon2id hash")

// VerifyPassword reports whether pw is the password encoded hashes (in
// constant time). An unreadable hash matches nothing.
func VerifyPassword(encoded, pw string) bool {
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
// address costs as much time as a wrong password and the answer's delay
// does not tell which addresses have accounts.
var dummyHash = sync.OnceValue(func() string { return HashPassword("no account has this password, it only spends the time") })

// SpendHashTime verifies pw against a hash nobody has: the time a
// password check takes, for an address without an account.
func SpendHashTime(pw string) { VerifyPassword(dummyHash(), pw) }
