package mailer

import (
	"fmt"
	"os"

	gomail "github.com/wneessen/go-mail"
)

// DKIMHeaders are the headers the signature covers. The list is short on
// purpose: go-mail folds a long h= tag inside a header name, which breaks
// the signature. It covers what a receiver checks (From, Subject, Date,
// Message-ID) and the one-click unsubscribe headers, so nobody can graft an
// unsubscribe target onto a signed mail.
var DKIMHeaders = []string{"From", "To", "Subject", "Date", "Message-ID", "List-Unsubscribe", "List-Unsubscribe-Post"}

// NewDKIMSigner reads a PEM private key (RSA or Ed25519) and returns a
// signer for domain and selector.
func NewDKIMSigner(keyFile, domain, selector string) (*gomail.DKIMSigner, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("dkim key: %w", err)
	}
	key, err := gomail.PrivKeyFromPEM(pem)
	if err != nil {
		return nil, fmt.Errorf("dkim key %s: %w", keyFile, err)
	}
	s := gomail.NewDKIMSigner(domain, selector, key)
	s.SignHeaders(DKIMHeaders...)
	if err := s.ValidateConfig(); err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}
	return s, nil
}
