package webpush

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// The aes128gcm content coding of a push message (RFC 8188, RFC 8291):
// one record, whose header carries the salt, the record size and the
// sender's one-time public key.
const (
	saltLen    = 16
	headerLen  = saltLen + 4 + 1 + PublicKeyLen // salt, rs, idlen, keyid
	tagLen     = 16
	recordSize = 4096
	// MaxPayload is the largest plaintext that fits the 4096-byte body
	// every push service must take (RFC 8030 section 7.2): the header,
	// the padding delimiter and the GCM tag take the rest.
	MaxPayload = recordSize - headerLen - 1 - tagLen
)

// ErrTooLarge: the payload does not fit one push message (of a browser's
// push service, APNs or FCM: each error says which limit).
var ErrTooLarge = errors.New("push payload too large")

// Encrypt encrypts plaintext for the browser of s, with a fresh key pair
// and salt of its own, as the body of one push message.
func Encrypt(s Subscription, plaintext []byte) ([]byte, error) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("push: one-time key: %w", err)
	}
	var salt [saltLen]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, fmt.Errorf("push: salt: %w", err)
	}
	return encrypt(s, plaintext, key, salt[:])
}

// encrypt is Encrypt with the sender's key and the salt given (RFC 8291
// section 5's example fixes both).
func encrypt(s Subscription, plaintext []byte, as *ecdh.PrivateKey, salt []byte) ([]byte, error) {
	if len(plaintext) > MaxPayload {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(plaintext), MaxPayload)
	}
	if len(s.Auth) != AuthSecretLen {
		return nil, fmt.Errorf("%w: keys.auth is %d bytes", ErrBadSubscription, len(s.Auth))
	}
	ua, err := ecdh.P256().NewPublicKey(s.P256DH)
	if err != nil {
		return nil, fmt.Errorf("%w: keys.p256dh is not a P-256 point", ErrBadSubscription)
	}
	secret, err := as.ECDH(ua)
	if err != nil {
		return nil, fmt.Errorf("%w: ECDH: %v", ErrBadSubscription, err)
	}
	asPublic := as.PublicKey().Bytes()

	// RFC 8291 section 3.4: the input keying material mixes the ECDH
	// secret with the browser's auth secret and both public keys…
	info := make([]byte, 0, 14+2*PublicKeyLen)
	info = append(info, "WebPush: info\x00"...)
	info = append(info, s.P256DH...)
	info = append(info, asPublic...)
	ikm, err := hkdf.Key(sha256.New, secret, s.Auth, string(info), 32)
	if err != nil {
		return nil, fmt.Errorf("push: hkdf: %w", err)
	}
	// …and RFC 8188 section 2.2 derives the content key and nonce from it
	// with the salt.
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, fmt.Errorf("push: hkdf: %w", err)
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, fmt.Errorf("push: hkdf: %w", err)
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, fmt.Errorf("push: hkdf: %w", err)
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, fmt.Errorf("push: aes: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("push: gcm: %w", err)
	}

	out := make([]byte, headerLen, headerLen+len(plaintext)+1+tagLen)
	copy(out, salt)
	binary.BigEndian.PutUint32(out[saltLen:], recordSize)
	out[saltLen+4] = PublicKeyLen
	copy(out[saltLen+5:], asPublic)
	// The one and last record: the plaintext, then the delimiter 0x02 and
	// no padding (a notification's length tells little; 4 KB of padding
	// per message would cost the push service's bandwidth and ours).
	record := append(out[headerLen:headerLen], plaintext...)
	record = append(record, 2)
	return gcm.Seal(out, nonce, record, nil), nil
}
