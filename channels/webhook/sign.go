package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (Standard Webhooks, "Webhook headers").
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const secretPrefix = "whsec_"

// secretBytes is the size of a new secret: 32 random bytes, inside the
// specification's 24 to 64.
const secretBytes = 32

// NewSecret makes an endpoint's signing secret: "whsec_" and the base64 of
// random bytes, the form the specification gives to consumers.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ErrSecret is a secret that is not "whsec_" and base64 of 24 to 64 bytes.
var ErrSecret = errors.New(`webhook secret: want "whsec_" and the base64 of 24 to 64 bytes`)

// secretKey is the HMAC key of a secret.
func secretKey(secret string) ([]byte, error) {
	raw, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, ErrSecret
	}
	return key, nil
}

// Sign is the webhook-signature of one attempt: "v1," and the base64
// HMAC-SHA256 of "id.timestamp.body" (timestamp in unix seconds).
func Sign(secret, id string, at time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
