package mailer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/emersion/go-msgauth/dkim"
	gomail "github.com/wneessen/go-mail"
)

// DKIMHeaders are the headers the signature covers: what a receiver
// checks (From, Subject, Date, Message-ID), what decides how the mail is
// read (Content-Type, MIME-Version), and the list headers, so nobody can
// graft an unsubscribe target or another list onto a signed mail. From and
// Subject are listed twice (oversigning): a header listed once more than
// it occurs also signs its absence, so a second From or Subject added in
// transit breaks the signature.
var DKIMHeaders = []string{
	"From", "From", "To", "Subject", "Subject", "Date", "Message-ID",
	"Content-Type", "MIME-Version", "List-Id", "List-Unsubscribe", "List-Unsubscribe-Post", "Feedback-ID",
}

// DKIM signs mail with emersion/go-msgauth, the verifier the tests use.
// go-mail's own signer folds a long h= tag inside a header name, which
// breaks the signature for a list as long as DKIMHeaders.
type DKIM struct {
	opts dkim.SignOptions
}

// NewDKIMSigner reads a PEM private key (RSA or Ed25519) and returns a
// signer for domain and selector.
func NewDKIMSigner(keyFile, domain, selector string) (*DKIM, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("dkim key: %w", err)
	}
	key, err := gomail.PrivKeyFromPEM(pem)
	if err != nil {
		return nil, fmt.Errorf("dkim key %s: %w", keyFile, err)
	}
	if domain == "" || selector == "" {
		return nil, fmt.Errorf("dkim: domain and selector are required")
	}
	return &DKIM{opts: dkim.SignOptions{
		Domain: domain, Selector: selector, Signer: key, HeaderKeys: DKIMHeaders,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed,
	}}, nil
}

// sign adds the DKIM-Signature header to m. It writes m once to sign its
// bytes: go-mail writes the same bytes again when it sends (the date,
// Message-ID and multipart boundaries are fixed by then), and the relaxed
// canonicalization does not depend on where the new header goes.
func (d *DKIM) sign(m *gomail.Msg) error {
	var raw bytes.Buffer
	if _, err := m.WriteTo(&raw); err != nil {
		return fmt.Errorf("dkim: %w", err)
	}
	s, err := dkim.NewSigner(&d.opts)
	if err != nil {
		return fmt.Errorf("dkim: %w", err)
	}
	if _, err := io.Copy(s, &raw); err != nil {
		return fmt.Errorf("dkim: %w", err)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("dkim: %w", err)
	}
	value := strings.TrimSuffix(strings.TrimPrefix(s.Signature(), "DKIM-Signature: "), "\r\n")
	m.SetGenHeaderPreformatted("DKIM-Signature", value)
	return nil
}
