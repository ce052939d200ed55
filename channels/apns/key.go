package apns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ErrKey is wrapped by every error of LoadKey and ParseKey: the file is
// not an APNs signing key.
var ErrKey = errors.New("not an APNs auth key: want the .p8 file (PEM, PKCS#8, EC P-256)")

// LoadKey reads an APNs auth key, the .p8 file Apple's developer site
// downloads once (NEWSLETTER_APNS_KEY_FILE).
func LoadKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseKey reads a .p8 key's content: a PEM "PRIVATE KEY" block holding a
// PKCS#8 EC key on P-256.
func ParseKey(p8 []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(p8)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: PEM block %q", ErrKey, block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T", ErrKey, k)
	}
	if ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: curve %s", ErrKey, ek.Curve.Params().Name)
	}
	return ek, nil
}
