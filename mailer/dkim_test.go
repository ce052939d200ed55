package mailer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/newsletter/newsletter/internal/smtptest"
)

func TestDKIMCoversListHeaders(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	keyFile := filepath.Join(t.TempDir(), "dkim.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	signer, err := NewDKIMSigner(keyFile, "example.com", "nl2026")
	if err != nil {
		t.Fatal(err)
	}

	srv := smtptest.Start(t)
	cfg, _ := ParseServerURL(srv.URL())
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", DKIM: signer, ListID: "Newsletter <news.example.com>"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Send(context.Background(), testMessage("reader@example.org")); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	if got.Header.Get("List-Id") != "Newsletter <news.example.com>" {
		t.Fatalf("List-Id %q", got.Header.Get("List-Id"))
	}
	lookup := func(domain string) ([]string, error) {
		if domain != "nl2026._domainkey.example.com" {
			t.Errorf("looked up %s", domain)
		}
		return []string{"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)}, nil
	}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(got.Data), &dkim.VerifyOptions{LookupTXT: lookup})
	if err != nil || len(verifs) != 1 {
		t.Fatalf("verify: %v (%d signatures)", err, len(verifs))
	}
	v := verifs[0]
	if v.Err != nil || v.Domain != "example.com" {
		t.Fatalf("signature does not verify: %v\n%s", v.Err, got.Data)
	}
	signed := make([]string, len(v.HeaderKeys))
	for i, k := range v.HeaderKeys {
		signed[i] = strings.ToLower(k)
	}
	for _, h := range []string{"from", "subject", "content-type", "mime-version", "list-id", "list-unsubscribe", "list-unsubscribe-post"} {
		if !slices.Contains(signed, h) {
			t.Errorf("%s is not covered by the signature (h=%v)", h, signed)
		}
	}
	// Every tampering below must break the signature.
	headerEnd := bytes.Index(got.Data, []byte("\r\n\r\n"))
	addHeader := func(h string) []byte {
		return slices.Concat(got.Data[:headerEnd+2], []byte(h+"\r\n"), got.Data[headerEnd+2:])
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(got.Data, []byte(old)) {
			t.Fatalf("the mail has no %q to tamper with:\n%s", old, got.Data)
		}
		return bytes.Replace(got.Data, []byte(old), []byte(new), 1)
	}
	for name, forged := range map[string][]byte{
		"List-Unsubscribe target": replace("token=abc", "token=evil"),
		"List-Id":                 replace("List-Id: Newsletter <news.example.com>", "List-Id: Other <other.example.com>"),
		"Content-Type":            replace("Content-Type: multipart/alternative", "Content-Type: multipart/mixed"),
		"MIME-Version":            replace("MIME-Version: 1.0", "MIME-Version: 1.1"),
		"a second From":           addHeader("From: Bank <security@bank.example>"),
		"a second Subject":        addHeader("Subject: Urgent: verify your account"),
	} {
		verifs, _ := dkim.VerifyWithOptions(bytes.NewReader(forged), &dkim.VerifyOptions{LookupTXT: lookup})
		if len(verifs) == 1 && verifs[0].Err == nil {
			t.Errorf("%s changed, and the signature still verifies", name)
		}
	}
}

func TestSessionKeepsOneConnection(t *testing.T) {
	srv := smtptest.Start(t)
	m := newTestSMTP(t, srv, 4)
	ctx := context.Background()
	sess, err := m.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := sess.Send(ctx, testMessage("s"+string(rune('a'+i))+"@example.org")); err != nil {
			t.Fatal(err)
		}
	}
	sess.Close()
	srv.WaitFor(t, 20, 5*time.Second)
	if srv.Sessions() != 1 {
		t.Fatalf("a batch of 20 used %d connections", srv.Sessions())
	}
	// The connection went back to the pool: the next send reuses it.
	if err := m.Send(ctx, testMessage("after@example.org")); err != nil || srv.Sessions() != 1 {
		t.Fatalf("after the session: %v, %d connections", err, srv.Sessions())
	}
}
