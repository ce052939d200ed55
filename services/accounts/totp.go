package accounts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// Issuer names the service in an authenticator app.
const Issuer = "Newsletter"

// The TOTP parameters every authenticator app reads: SHA-1, 6 digits, a
// 30-second step (RFC 6238's defaults).
const (
	TOTPPeriod = 30
	totpDigits = otp.DigitsSix
)

// totpOpts are the parameters of every code: no skew here, CheckCode
// tries the steps itself to learn which one matched.
var totpOpts = totp.ValidateOpts{Period: TOTPPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1}

// NewTOTP makes up a secret for the account email: the base32 secret to
// store and show, and the otpauth:// URI an app takes (the console shows
// it as a link and a QR code beside the secret to type).
func NewTOTP(email string) (secret, uri string, err error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: Issuer, AccountName: email, Period: TOTPPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return "", "", err
	}
	return key.Secret(), key.URL(), nil
}

// TOTPURI is the otpauth:// URI of a stored secret (to show it again
// while it waits for its first code), under issuer: the newsletter's name
// in the app's list (Issuer when empty).
func TOTPURI(issuer, email, secret string) string {
	if strings.TrimSpace(issuer) == "" {
		issuer = Issuer
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return ""
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: email, Period: TOTPPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1, Secret: raw})
	if err != nil {
		return ""
	}
	return key.URL()
}

// Step is the TOTP time step of t.
func Step(t time.Time) int64 { return t.Unix() / TOTPPeriod }

// Code is secret's code for the step of t (tests and the CLI's check).
func Code(secret string, t time.Time) (string, error) {
	return totp.GenerateCodeCustom(secret, t, totpOpts)
}

// CheckCode reports which time step code is of secret's, trying the step
// of now and one either way (a clock a little off, a code typed as it
// turned): the step, true; or false. The caller accepts the step only if
// it is later than the last one used (the store's replay guard).
func CheckCode(secret, code string, now time.Time) (int64, bool) {
	code = strings.TrimSpace(code)
	if len(code) != totpDigits.Length() {
		return 0, false
	}
	for _, d := range []int64{0, -1, 1} {
		step := Step(now) + d
		want, err := totp.GenerateCodeCustom(secret, time.Unix(step*TOTPPeriod, 0), totpOpts)
		if err == nil && constantEqual(want, code) {
			return step, true
		}
	}
	return 0, false
}

func constantEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var x byte
	for i := range len(a) {
		x |= a[i] ^ b[i]
	}
	return x == 0
}

// RecoveryCodes is how many recovery codes an account gets.
const RecoveryCodes = 10

// recoveryAlphabet leaves out the letters read for digits (Crockford's
// base32 without I, L, O, U).
var recoveryEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// NewRecoveryCodes makes RecoveryCodes codes (80 random bits each, shown
// as xxxx-xxxx-xxxx-xxxx) and their hashes, which are all that is kept.
func NewRecoveryCodes() (codes, hashes []string) {
	for range RecoveryCodes {
		b := make([]byte, 10)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
		s := recoveryEncoding.EncodeToString(b)
		code := s[0:4] + "-" + s[4:8] + "-" + s[8:12] + "-" + s[12:16]
		codes = append(codes, code)
		hashes = append(hashes, HashRecoveryCode(code))
	}
	return codes, hashes
}

// HashRecoveryCode is what is kept of a recovery code: the SHA-256 of it
// in upper case without dashes or spaces (a plain hash suffices: 80
// random bits are in no dictionary). Typed codes are hashed the same way.
func HashRecoveryCode(code string) string {
	c := strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(code)))
	sum := sha256.Sum256([]byte("recovery:" + c))
	return hex.EncodeToString(sum[:])
}

// LooksLikeRecoveryCode tells a recovery code typed into the code field
// from a TOTP code.
func LooksLikeRecoveryCode(code string) bool {
	c := strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(code))
	return len(c) == 16
}
