package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// writeKey writes key as a PKCS #8 PEM file and returns its path and the
// DNS TXT record of its public half.
func writeKey(t *testing.T, key crypto.Signer) (file, record string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	switch pub := key.Public().(type) {
	case ed25519.PublicKey:
		return file, "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)
	default:
		b, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return file, "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(b)
	}
}

// TestServiceSignsWithBothKeys: with an RSA and an Ed25519 key configured,
// a mail received over SMTP carries two signatures, and each verifies.
func TestServiceSignsWithBothKeys(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ek, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaFile, rsaRecord := writeKey(t, rk)
	edFile, edRecord := writeKey(t, ek)
	records := map[string]string{"rsa2026._domainkey.example.com": rsaRecord, "ed2026._domainkey.example.com": edRecord}

	_, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_FROM":                  "News <news@news.example.com>",
		"NEWSLETTER_DKIM_DOMAIN":           "example.com",
		"NEWSLETTER_DKIM_KEY_FILE":         rsaFile,
		"NEWSLETTER_DKIM_SELECTOR":         "rsa2026",
		"NEWSLETTER_DKIM_ED25519_KEY_FILE": edFile,
		"NEWSLETTER_DKIM_ED25519_SELECTOR": "ed2026",
	}), "serve")
	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"signed@example.org"}})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()
	got := smtpSrv.WaitFor(t, 1, poll.BusyMachine)[0]
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(got.Data), &dkim.VerifyOptions{LookupTXT: func(d string) ([]string, error) {
		if r, ok := records[d]; ok {
			return []string{r}, nil
		}
		return nil, fmt.Errorf("no TXT record for %s", d)
	}})
	if err != nil || len(verifs) != 2 {
		t.Fatalf("verify: %v, %d signatures:\n%s", err, len(verifs), got.Data)
	}
	for _, v := range verifs {
		if v.Err != nil || v.Domain != "example.com" {
			t.Errorf("signature of %s: %v", v.Domain, v.Err)
		}
	}
	for _, s := range []string{"s=rsa2026;", "s=ed2026;", "a=rsa-sha256;", "a=ed25519-sha256;"} {
		if !bytes.Contains(got.Data, []byte(s)) {
			t.Errorf("no signature with %s", s)
		}
	}
}

// TestDKIMMisconfigurationRefusesToStart: an unaligned domain or a key of
// the wrong kind stops start-up with a line naming the variable.
func TestDKIMMisconfigurationRefusesToStart(t *testing.T) {
	_, ek, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edFile, _ := writeKey(t, ek)
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	for want, extra := range map[string]map[string]string{
		"NEWSLETTER_DKIM_DOMAIN: ": {"NEWSLETTER_DKIM_DOMAIN": "unrelated.example.net", "NEWSLETTER_DKIM_KEY_FILE": edFile, "NEWSLETTER_DKIM_SELECTOR": "s1"},
		// Two Ed25519 keys: receivers that do not know Ed25519 would see none.
		"NEWSLETTER_DKIM_KEY_FILE: want an RSA key": {"NEWSLETTER_DKIM_DOMAIN": "example.com", "NEWSLETTER_DKIM_KEY_FILE": edFile, "NEWSLETTER_DKIM_SELECTOR": "s1",
			"NEWSLETTER_DKIM_ED25519_KEY_FILE": edFile, "NEWSLETTER_DKIM_ED25519_SELECTOR": "s2"},
		"NEWSLETTER_DKIM_KEY_FILE: dkim key": {"NEWSLETTER_DKIM_DOMAIN": "example.com", "NEWSLETTER_DKIM_KEY_FILE": filepath.Join(t.TempDir(), "missing.pem"), "NEWSLETTER_DKIM_SELECTOR": "s1"},
	} {
		env := realEnv(redisURL, smtpSrv.URL(), extra)
		env["NEWSLETTER_FROM"] = "News <news@news.example.com>"
		env["NEWSLETTER_ADDR"] = freeAddr(t)
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := run(ctx, []string{"worker"}, func(k string) string { return env[k] }, &out, &errb)
		cancel()
		if code == 0 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d:\n%s", want, code, errb.String())
		}
	}
}
