package email

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"strings"

	gomail "github.com/wneessen/go-mail"
)

// DKIMHeaders are the headers every signature covers, present or not: what
// a reader sees and a receiver checks (From, Reply-To, Sender, To, Cc,
// Subject, Date, Message-ID, the thread), what decides how the body is read
// (MIME-Version, Content-Type, Content-Transfer-Encoding), and the list and
// feedback headers, so nobody can graft an unsubscribe target, a list or a
// reply address onto a signed mail. Any other header a message carries is
// signed too (signedHeaders).
//
// Each is listed in h= once more than it occurs in the message
// (oversigning): the last listing matches no header and so signs its
// absence. A receiver picks the instances of a name from the bottom up, so
// one more added anywhere, at the top or at the bottom, takes the place of
// that empty instance or shifts the others, and the signature no longer
// verifies.
var DKIMHeaders = []string{
	"From", "Reply-To", "Sender", "To", "Cc", "Subject", "Date", "Message-ID",
	"In-Reply-To", "References", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
	"List-Id", "List-Unsubscribe", "List-Unsubscribe-Post", "List-Help", "List-Subscribe",
	"List-Post", "List-Owner", "List-Archive", "Feedback-ID",
}

// unsigned are the headers that relays add on the way by design (trace and
// authentication results, other signatures): signing their absence would
// break the signature at the first hop.
var unsigned = map[string]bool{
	"dkim-signature": true, "received": true, "return-path": true, "authentication-results": true,
	"arc-seal": true, "arc-message-signature": true, "arc-authentication-results": true,
}

// DKIMKey is one signing key: its selector (the DNS record
// <selector>._domainkey.<domain> holds the public key) and the private key,
// RSA or Ed25519.
type DKIMKey struct {
	Selector string
	Key      crypto.Signer
}

// Algorithm is "rsa" or "ed25519", as in the DNS record's k= tag.
func (k DKIMKey) Algorithm() string {
	switch k.Key.Public().(type) {
	case *rsa.PublicKey:
		return "rsa"
	case ed25519.PublicKey:
		return "ed25519"
	}
	return fmt.Sprintf("%T", k.Key.Public())
}

// DKIM signs mail for one domain, with one signature per key: a sender
// signs with RSA and Ed25519 together, and a receiver that does not know
// Ed25519 checks the RSA one (RFC 8463). The signatures are made in
// dkimsign.go and checked in the tests by emersion/go-msgauth's verifier;
// go-mail's own signer folds a long h= tag inside a header name, which
// breaks the signature.
type DKIM struct {
	domain string
	keys   []DKIMKey
	// leave are the header names (lower case) no signature covers: those
	// a transport replaces after signing (WithoutHeaders).
	leave map[string]bool
}

// WithoutHeaders returns a signer like d whose signatures leave out the
// named headers: a transport that replaces them after signing (SES sets
// its own Date and Message-ID) would break a signature covering them.
func (d *DKIM) WithoutHeaders(names ...string) *DKIM {
	out := *d
	out.leave = make(map[string]bool, len(d.leave)+len(names))
	for n := range d.leave {
		out.leave[n] = true
	}
	for _, n := range names {
		out.leave[strings.ToLower(n)] = true
	}
	return &out
}

// NewDKIM returns a signer for domain with keys, each signing every mail.
func NewDKIM(domain string, keys ...DKIMKey) (*DKIM, error) {
	if domain == "" {
		return nil, errors.New("dkim: a domain is required")
	}
	if len(keys) == 0 {
		return nil, errors.New("dkim: a key is required")
	}
	for _, k := range keys {
		if k.Selector == "" {
			return nil, errors.New("dkim: every key needs a selector")
		}
		if a := k.Algorithm(); a != "rsa" && a != "ed25519" {
			return nil, fmt.Errorf("dkim: selector %s: want an RSA or Ed25519 key, not %s", k.Selector, a)
		}
	}
	return &DKIM{domain: domain, keys: keys}, nil
}

// NewDKIMSigner reads a PEM private key (RSA or Ed25519) and returns a
// signer for domain and selector with that one key.
func NewDKIMSigner(keyFile, domain, selector string) (*DKIM, error) {
	key, err := ReadDKIMKey(keyFile)
	if err != nil {
		return nil, err
	}
	return NewDKIM(domain, DKIMKey{Selector: selector, Key: key})
}

// ReadDKIMKey reads a PEM private key (PKCS #1, PKCS #8; RSA or Ed25519).
func ReadDKIMKey(file string) (crypto.Signer, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("dkim key: %w", err)
	}
	key, err := gomail.PrivKeyFromPEM(pem)
	if err != nil {
		return nil, fmt.Errorf("dkim key %s: %w", file, err)
	}
	return key, nil
}

// Sign returns the DKIM-Signature header fields for the message whose
// header block is header (its fields, each ending in CRLF, without the
// empty line after them) and whose body is body (what follows the empty
// line): one field per key, each ending in CRLF, to be written in front
// of the header block. The signatures use relaxed canonicalization of
// both header and body, so where the fields go and how a relay refolds
// the header does not matter.
func (d *DKIM) Sign(header, body []byte) ([]byte, error) {
	return d.sign(header, relaxedBodyHash(body))
}

// SignMessage is Sign for a whole message (header, empty line, body).
func (d *DKIM) SignMessage(msg []byte) ([]byte, error) {
	end := bytes.Index(msg, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, errors.New("dkim: the message has no empty line after its header")
	}
	return d.Sign(msg[:end+2], msg[end+4:])
}

// signedHeaders is the h= list for a message with header: DKIMHeaders and
// every other header the message has (but those relays add), each name
// once more than it occurs.
func signedHeaders(header []byte) []string {
	count := map[string]int{}
	var others []string // in the order they first appear
	known := make(map[string]bool, len(DKIMHeaders))
	for _, h := range DKIMHeaders {
		known[strings.ToLower(h)] = true
	}
	for line := range bytes.SplitSeq(header, []byte("\r\n")) {
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			continue // a folded line continues the field before it
		}
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		n := strings.TrimSpace(string(name))
		lower := strings.ToLower(n)
		if count[lower] == 0 && !known[lower] && !unsigned[lower] {
			others = append(others, n)
		}
		count[lower]++
	}
	var keys []string
	for _, n := range append(DKIMHeaders[:len(DKIMHeaders):len(DKIMHeaders)], others...) {
		for range count[strings.ToLower(n)] + 1 {
			keys = append(keys, n)
		}
	}
	return keys
}
