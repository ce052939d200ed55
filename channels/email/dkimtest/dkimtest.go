// Package dkimtest gives tests a pair of DKIM keys (RSA-2048 and Ed25519)
// with the DNS records a receiver would look up for them, and a verifier
// (go-msgauth's) that answers its look-ups from those records: the
// e-mail channel's tests of signing and the mailer's of composing both
// check signatures as a receiver does.
package dkimtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// The keys' selectors at example.com.
const (
	RSASelector = "rsa2026"
	EdSelector  = "ed2026"
)

// Keys are the two keys and the TXT records of their selectors
// (<selector>._domainkey.example.com → record); a test may delete a
// record to see a signature fail.
type Keys struct {
	RSA     *rsa.PrivateKey
	Ed      ed25519.PrivateKey
	Records map[string]string
}

// New makes a fresh pair.
func New(t testing.TB) *Keys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, ek, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &Keys{RSA: rk, Ed: ek, Records: map[string]string{
		RSASelector + "._domainkey.example.com": "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(rsaPub),
		EdSelector + "._domainkey.example.com":  "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub),
	}}
}

// Verify checks every DKIM-Signature of raw, the DNS answered from
// k.Records.
func (k *Keys) Verify(raw []byte) ([]*dkim.Verification, error) {
	return dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: func(domain string) ([]string, error) {
		if r, ok := k.Records[domain]; ok {
			return []string{r}, nil
		}
		return nil, fmt.Errorf("no TXT record for %s", domain)
	}})
}
