package webpush

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The ways a VAPID setting can be wrong; NewVAPID wraps one of them.
var (
	ErrVAPIDPublicKey  = errors.New("not a VAPID public key: want the base64url of an uncompressed P-256 point (65 bytes, 87 characters)")
	ErrVAPIDPrivateKey = errors.New("not a VAPID private key: want the base64url of a P-256 private scalar (32 bytes, 43 characters)")
	ErrVAPIDMismatch   = errors.New("the VAPID public key is not the private key's")
	ErrVAPIDSubject    = errors.New("not a VAPID subject: want mailto:you@example.com or an https:// URL")
)

// How long a VAPID JWT lives, and how long before its end a new one is
// signed. RFC 8292 caps the lifetime at 24 hours; a service's clock may
// run ahead of ours, so we stay well inside.
const (
	jwtLifetime = 12 * time.Hour
	jwtRenew    = time.Hour
	// maxAudiences bounds the JWT cache. Audiences are push services'
	// origins, a handful in practice; endpoints are handed in by
	// browsers, so a flood of made-up origins must not grow it forever.
	maxAudiences = 256
)

// VAPID is the operator's identity towards push services (RFC 8292): an
// ES256 key pair, whose public half browsers bind each subscription to,
// and a contact (sub). Safe for concurrent use.
type VAPID struct {
	key       *ecdsa.PrivateKey
	public    []byte
	publicB64 string
	subject   string

	mu     sync.Mutex
	tokens map[string]vapidToken // by audience
}

type vapidToken struct {
	header string    // the whole Authorization value
	exp    time.Time // the JWT's exp
}

// GenerateVAPIDKeys makes a new key pair, as NEWSLETTER_VAPID_PUBLIC_KEY
// and NEWSLETTER_VAPID_PRIVATE_KEY take them: base64url without padding of
// the uncompressed public point and of the 32-byte private scalar.
func GenerateVAPIDKeys() (public, private string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate a VAPID key: %w", err)
	}
	pub, err := k.PublicKey.Bytes()
	if err != nil {
		return "", "", fmt.Errorf("encode the VAPID public key: %w", err)
	}
	priv, err := k.Bytes()
	if err != nil {
		return "", "", fmt.Errorf("encode the VAPID private key: %w", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(pub), enc.EncodeToString(priv), nil
}

// NewVAPID checks and loads a key pair and subject. The error wraps
// ErrVAPIDPublicKey, ErrVAPIDPrivateKey, ErrVAPIDMismatch or
// ErrVAPIDSubject, so a caller can name the setting that is wrong.
func NewVAPID(public, private, subject string) (*VAPID, error) {
	pub, err := decodeKey(public)
	if err != nil {
		return nil, ErrVAPIDPublicKey
	}
	pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pub)
	if err != nil {
		return nil, ErrVAPIDPublicKey
	}
	priv, err := decodeKey(private)
	if err != nil || len(priv) != 32 {
		return nil, ErrVAPIDPrivateKey
	}
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), priv)
	if err != nil {
		return nil, ErrVAPIDPrivateKey
	}
	if !key.PublicKey.Equal(pk) {
		return nil, ErrVAPIDMismatch
	}
	if err := CheckSubject(subject); err != nil {
		return nil, err
	}
	return &VAPID{key: key, public: pub, publicB64: base64.RawURLEncoding.EncodeToString(pub), subject: subject,
		tokens: map[string]vapidToken{}}, nil
}

// CheckSubject says whether s is a contact RFC 8292 allows: a mailto: URI
// with an address, or an https URL. Apple's push service refuses others.
func CheckSubject(s string) error {
	if addr, ok := strings.CutPrefix(s, "mailto:"); ok {
		if a, err := mail.ParseAddress(addr); err == nil && a.Name == "" && a.Address == addr {
			return nil
		}
		return ErrVAPIDSubject
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return ErrVAPIDSubject
	}
	return nil
}

// PublicKey is the public key as the browser's applicationServerKey takes
// it (base64url, no padding).
func (v *VAPID) PublicKey() string { return v.publicB64 }

// Subject is the contact the JWTs carry.
func (v *VAPID) Subject() string { return v.subject }

// Authorization is the Authorization header of a message to endpoint:
// what Client.Send sends, for a caller that posts by itself.
func (v *VAPID) Authorization(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: endpoint is not an https URL", ErrBadSubscription)
	}
	return v.authorization(audience(u), time.Now())
}

// authorization is the Authorization header for a request to a push
// service at origin aud (RFC 8292 section 3): "vapid t=<JWT>, k=<key>".
// One JWT serves an audience for most of its lifetime: signing is most of
// the cost of a notification otherwise.
func (v *VAPID) authorization(aud string, now time.Time) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t, ok := v.tokens[aud]; ok && now.Before(t.exp.Add(-jwtRenew)) {
		return t.header, nil
	}
	exp := now.Add(jwtLifetime).Truncate(time.Second)
	jwt, err := v.sign(aud, exp)
	if err != nil {
		return "", err
	}
	if len(v.tokens) >= maxAudiences {
		clear(v.tokens)
	}
	t := vapidToken{header: "vapid t=" + jwt + ", k=" + v.publicB64, exp: exp}
	v.tokens[aud] = t
	return t.header, nil
}

// jwtHeader is the JOSE header of every VAPID JWT, encoded once.
var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))

type jwtClaims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// sign makes an ES256 JWT (RFC 7515, RFC 7518 section 3.4: the signature
// is r and s, 32 bytes each, not ASN.1).
func (v *VAPID) sign(aud string, exp time.Time) (string, error) {
	claims, err := json.Marshal(jwtClaims{Aud: aud, Exp: exp.Unix(), Sub: v.subject})
	if err != nil {
		return "", fmt.Errorf("vapid claims: %w", err)
	}
	enc := base64.RawURLEncoding
	signing := jwtHeader + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, v.key, digest[:])
	if err != nil {
		return "", fmt.Errorf("vapid signature: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}

// audience is the origin of an endpoint: the JWT's aud.
func audience(u *url.URL) string { return u.Scheme + "://" + u.Host }
