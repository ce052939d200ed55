package webpush

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Subscription is one browser's push subscription: where to post and the
// keys to encrypt for (the Push API's PushSubscription).
type Subscription struct {
	Endpoint string
	// P256DH is the browser's ECDH public key: an uncompressed P-256
	// point, 65 bytes.
	P256DH []byte
	// Auth is the browser's authentication secret, 16 bytes.
	Auth []byte
}

// Sizes of a subscription's keys (RFC 8291 section 3).
const (
	PublicKeyLen  = 65
	AuthSecretLen = 16
	// MaxEndpointLen bounds an endpoint URL; the push services' are a
	// few hundred characters.
	MaxEndpointLen = 2048
)

// ErrBadSubscription is wrapped by every complaint about a subscription
// a browser handed in.
var ErrBadSubscription = errors.New("bad push subscription")

// subscriptionJSON is PushSubscription.toJSON() as browsers send it.
type subscriptionJSON struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256DH string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// ParseSubscription reads the JSON of a PushSubscription
// ({"endpoint":…,"keys":{"p256dh":…,"auth":…}}, keys in base64url) and
// checks it (Check). It does not judge the endpoint's host: that is
// netguard's part.
func ParseSubscription(b []byte) (Subscription, error) {
	var raw subscriptionJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return Subscription{}, fmt.Errorf("%w: not PushSubscription JSON: %v", ErrBadSubscription, err)
	}
	if dec.More() {
		return Subscription{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadSubscription)
	}
	p256dh, err := decodeKey(raw.Keys.P256DH)
	if err != nil {
		return Subscription{}, fmt.Errorf("%w: keys.p256dh: %v", ErrBadSubscription, err)
	}
	auth, err := decodeKey(raw.Keys.Auth)
	if err != nil {
		return Subscription{}, fmt.Errorf("%w: keys.auth: %v", ErrBadSubscription, err)
	}
	s := Subscription{Endpoint: raw.Endpoint, P256DH: p256dh, Auth: auth}
	return s, s.Check()
}

// Check says whether s can be sent to: an absolute http(s) endpoint URL,
// a P-256 public key on the curve, a 16-byte secret.
func (s Subscription) Check() error {
	if s.Endpoint == "" {
		return fmt.Errorf("%w: no endpoint", ErrBadSubscription)
	}
	if len(s.Endpoint) > MaxEndpointLen {
		return fmt.Errorf("%w: endpoint longer than %d characters", ErrBadSubscription, MaxEndpointLen)
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: endpoint is not an https URL", ErrBadSubscription)
	}
	if len(s.P256DH) != PublicKeyLen {
		return fmt.Errorf("%w: keys.p256dh is %d bytes, want %d (an uncompressed P-256 point)", ErrBadSubscription, len(s.P256DH), PublicKeyLen)
	}
	if _, err := ecdh.P256().NewPublicKey(s.P256DH); err != nil {
		return fmt.Errorf("%w: keys.p256dh is not a point on P-256", ErrBadSubscription)
	}
	if len(s.Auth) != AuthSecretLen {
		return fmt.Errorf("%w: keys.auth is %d bytes, want %d", ErrBadSubscription, len(s.Auth), AuthSecretLen)
	}
	return nil
}

// MarshalJSON writes s as a PushSubscription's JSON.
func (s Subscription) MarshalJSON() ([]byte, error) {
	var raw subscriptionJSON
	raw.Endpoint = s.Endpoint
	raw.Keys.P256DH = base64.RawURLEncoding.EncodeToString(s.P256DH)
	raw.Keys.Auth = base64.RawURLEncoding.EncodeToString(s.Auth)
	return json.Marshal(raw)
}

// decodeKey decodes a key as browsers write it (base64url without
// padding), also taking padding and the standard alphabet, which some
// client libraries send.
func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	s = strings.TrimRight(s, "=")
	enc := base64.RawURLEncoding
	if strings.ContainsAny(s, "+/") {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64url")
	}
	return b, nil
}
