package worker

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/emersion/go-msgauth/dkim"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/sestest"
	"github.com/newsletter/newsletter/mailer"
)

// newTestDKIM is a signer for example.com with a fresh RSA key, and a
// go-msgauth verifier that looks its record up.
func newTestDKIM(t *testing.T) (*email.DKIM, func([]byte) ([]*dkim.Verification, error)) {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := email.NewDKIM("example.com", email.DKIMKey{Selector: "rsa2026", Key: rk})
	if err != nil {
		t.Fatal(err)
	}
	record := "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(pub)
	return signer, func(raw []byte) ([]*dkim.Verification, error) {
		return dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: func(domain string) ([]string, error) {
			if domain == "rsa2026._domainkey.example.com" {
				return []string{record}, nil
			}
			return nil, fmt.Errorf("no TXT record for %s", domain)
		}})
	}
}

// newTestSES is an SES transport against srv, with retries that do not
// wait.
func newTestSES(t *testing.T, srv *sestest.Server) *email.SES {
	t.Helper()
	s, err := email.NewSES(context.Background(), email.SESOptions{
		Region: srv.Region, Endpoint: srv.URL(), MaxBackoff: time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider(sestest.AccessKeyID, sestest.SecretAccessKey, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEmailOverSESKeepsHeadersAndDKIM: a mail composed as the SMTP
// mailer composes it reaches SES with its List headers (and no
// Feedback-ID of ours: SES writes its own, and a second one stays
// unsigned beside it),
// the VERP tag in the Message-ID and in the feedback address, and a DKIM
// signature that still verifies after SES has replaced Date, Message-ID
// and Feedback-ID and added X-SES-Outgoing (the stand-in does as SES
// does). A signature over those (as the SMTP mailer signs, Feedback-ID
// oversigned) would not.
func TestEmailOverSESKeepsHeadersAndDKIM(t *testing.T) {
	signer, verify := newTestDKIM(t)
	srv := sestest.Start(t, "us-east-1")
	// As the binary builds it: NewEmail has the signatures leave out what
	// SES rewrites.
	m, err := NewEmail(mailer.ComposeOptions{
		From: "News <news@example.com>", ListID: "News <newsletter.example.com>", BounceAddress: "bounces@b.example.com",
	}, signer, newTestSES(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	msg := &mailer.Message{
		Kind: mailer.KindWelcome, To: "reader@example.org", ToName: "Rea Der", Tag: "t42", Subject: "Welcome",
		Text: "Hello", HTML: "<p>Hello</p>", UnsubscribeURL: "https://news.example.com/u?token=abc",
	}
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	h := got.Header
	for name, want := range map[string]string{
		"List-Unsubscribe":      "<https://news.example.com/u?token=abc>",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		"List-Id":               "News <newsletter.example.com>",
		"Feedback-ID":           "",
		"Message-Id":            "<" + msg.MessageID + ">",
		"Subject":               "Welcome",
	} {
		if h.Get(name) != want {
			t.Errorf("%s: %q, want %q", name, h.Get(name), want)
		}
	}
	if !strings.Contains(msg.MessageID, ".t42@example.com") || got.FeedbackTo != "bounces+t42@b.example.com" || got.To[0] != "reader@example.org" {
		t.Errorf("VERP: Message-ID %s, feedback to %s, to %v", msg.MessageID, got.FeedbackTo, got.To)
	}
	sent, err := verify(got.Data)
	if err != nil || len(sent) != 1 {
		t.Fatalf("DKIM as sent: %v %v", err, sent)
	}
	for _, n := range sent[0].HeaderKeys {
		switch strings.ToLower(n) {
		case "date", "message-id", "feedback-id", "x-ses-outgoing":
			t.Errorf("the signature covers %s, which SES writes: h=%v", n, sent[0].HeaderKeys)
		}
	}
	delivered, err := mail.ReadMessage(bytes.NewReader(got.Delivered()))
	if err != nil {
		t.Fatal(err)
	}
	if dh := delivered.Header; len(dh["Feedback-Id"]) != 1 || !strings.HasSuffix(dh.Get("Feedback-ID"), ":AmazonSES") ||
		dh.Get("X-Ses-Outgoing") == "" || !strings.HasSuffix(dh.Get("Message-ID"), "@email.amazonses.com>") {
		t.Fatalf("the stand-in does not deliver as SES does: %v", dh)
	}
	for name, raw := range map[string][]byte{"as sent": got.Data, "as delivered by SES": got.Delivered()} {
		verifs, err := verify(raw)
		if err != nil || len(verifs) != 1 || verifs[0].Err != nil {
			t.Errorf("DKIM %s: %v %v", name, err, verifs)
		}
	}

	// The control: the SMTP mailer's signature covers Date, Message-ID
	// and Feedback-ID, and SES's replacement breaks it.
	srv2 := sestest.Start(t, "us-east-1")
	plain, err := NewEmail(mailer.ComposeOptions{From: "News <news@example.com>"}, signer, rawOnly{newTestSES(t, srv2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Send(context.Background(), &mailer.Message{Kind: mailer.KindWelcome, To: "reader@example.org", Subject: "Welcome", Text: "Hello"}); err != nil {
		t.Fatal(err)
	}
	verifs, err := verify(srv2.WaitFor(t, 1, 5*time.Second)[0].Delivered())
	if err == nil && len(verifs) == 1 && verifs[0].Err == nil {
		t.Fatal("a signature over Date and Message-ID survived their replacement: the check above proves nothing")
	}
}

// rawOnly hides the SES transport's RewritesHeaders.
type rawOnly struct{ s *email.SES }

func (r rawOnly) SendRaw(ctx context.Context, from, to string, data []byte) error {
	return r.s.SendRaw(ctx, from, to, data)
}

// TestEmailRefusesABadMessageAsInvalid: a recipient go-mail cannot
// parse is Invalid, and nothing is sent.
func TestEmailRefusesABadMessageAsInvalid(t *testing.T) {
	srv := sestest.Start(t, "us-east-1")
	m, err := NewEmail(mailer.ComposeOptions{From: "News <news@example.com>"}, nil, newTestSES(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	err = m.Send(context.Background(), &mailer.Message{Kind: mailer.KindConfirm, To: "not an address", Subject: "x", Text: "x"})
	if se := email.AsSendError(err); se == nil || se.Class != email.Invalid || len(srv.Messages()) != 0 || srv.Attempts("not an address") != 0 {
		t.Fatalf("%v", err)
	}
}
