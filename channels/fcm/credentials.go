package fcm

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// Credentials is a Google service account's key file, the JSON the
// Firebase console's "Generate new private key" downloads
// (NEWSLETTER_FCM_CREDENTIALS_FILE).
type Credentials struct {
	Type         string `json:"type"`
	ProjectID    string `json:"project_id"`
	PrivateKeyID string `json:"private_key_id"`
	// PrivateKey is the PEM of a PKCS#8 RSA key.
	PrivateKey  string `json:"private_key"`
	ClientEmail string `json:"client_email"`
	// TokenURI is where the signed JWT is exchanged for an access token
	// (https://oauth2.googleapis.com/token for a real account).
	TokenURI string `json:"token_uri"`

	key *rsa.PrivateKey
}

// ErrCredentials is wrapped by every error of LoadCredentials and
// ParseCredentials: the file is not a usable service account key.
var ErrCredentials = errors.New("not a usable FCM service account key")

// LoadCredentials reads and checks a service account key file.
func LoadCredentials(path string) (*Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCredentials, err)
	}
	c, err := ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCredentials checks a service account key file's content: every
// field the exchange needs is there, the token URI is an http(s) URL and
// the private key parses as PKCS#8 RSA. The errors name the field, never
// the key's content.
func ParseCredentials(b []byte) (*Credentials, error) {
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrCredentials, err)
	}
	if c.Type != "service_account" {
		return nil, fmt.Errorf("%w: type is %q, want service_account", ErrCredentials, c.Type)
	}
	for _, f := range []struct{ name, value string }{
		{"project_id", c.ProjectID},
		{"private_key_id", c.PrivateKeyID},
		{"private_key", c.PrivateKey},
		{"client_email", c.ClientEmail},
		{"token_uri", c.TokenURI},
	} {
		if f.value == "" {
			return nil, fmt.Errorf("%w: %s is missing", ErrCredentials, f.name)
		}
	}
	if u, err := url.Parse(c.TokenURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: token_uri %q is not an http(s) URL", ErrCredentials, c.TokenURI)
	}
	key, err := parseRSAKey(c.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("%w: private_key: %v", ErrCredentials, err)
	}
	c.key = key
	return &c, nil
}

func parseRSAKey(p string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("PEM block %q, want PRIVATE KEY (PKCS#8)", block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not PKCS#8: %v", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, want an RSA key", k)
	}
	return rk, nil
}
