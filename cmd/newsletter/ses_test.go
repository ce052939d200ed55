package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/newsletter/newsletter/channels/email/sestest"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// awsTestCredentials puts the SES stand-in's key into the environment,
// where the AWS SDK's default chain finds it, and keeps the chain from
// the machine's own profile files and instance metadata.
func awsTestCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", sestest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sestest.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestSignupFlowOverSES runs the service (serve, real Redis) with
// NEWSLETTER_EMAIL_TRANSPORT=ses against the SES stand-in, which checks
// every request's SigV4 signature and form: the confirmation arrives
// there, then the welcome, each with its headers as composed (the VERP
// address for SES's feedback, List-Unsubscribe on the welcome) and a DKIM
// signature that verifies on the message as SES delivers it.
func TestSignupFlowOverSES(t *testing.T) {
	awsTestCredentials(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, record := writeKey(t, key)
	verify := func(raw []byte) error {
		verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: func(d string) ([]string, error) {
			if d == "nl2026._domainkey.example.com" {
				return []string{record}, nil
			}
			return nil, fmt.Errorf("no TXT record for %s", d)
		}})
		if err != nil {
			return err
		}
		if len(verifs) != 1 {
			return fmt.Errorf("%d signatures", len(verifs))
		}
		return verifs[0].Err
	}

	_, redisURL := redistest.New(t, redistest.DBCommand)
	ses := sestest.Start(t, "eu-west-1")
	svc := startService(t, realEnv(redisURL, "", map[string]string{
		"NEWSLETTER_EMAIL_TRANSPORT": "ses",
		"NEWSLETTER_SES_REGION":      "eu-west-1",
		"NEWSLETTER_SES_ENDPOINT":    ses.URL(),
		"NEWSLETTER_FROM":            "News <news@news.example.com>",
		"NEWSLETTER_BOUNCE_ADDRESS":  "bounces@b.example.com",
		"NEWSLETTER_DKIM_DOMAIN":     "example.com",
		"NEWSLETTER_DKIM_KEY_FILE":   keyFile,
		"NEWSLETTER_DKIM_SELECTOR":   "nl2026",
		"NEWSLETTER_WELCOME_DELAY":   "1s",
	}), "serve")

	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"reader@example.org"}})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()

	confirm := ses.WaitFor(t, 1, 20*time.Second)[0]
	if confirm.To[0] != "reader@example.org" || confirm.Header.Get("To") == "" || confirm.Header.Get("List-Unsubscribe") != "" {
		t.Fatalf("confirmation: envelope %v, To %q, List-Unsubscribe %q", confirm.To, confirm.Header.Get("To"), confirm.Header.Get("List-Unsubscribe"))
	}
	if !strings.HasPrefix(confirm.FeedbackTo, "bounces+") || !strings.HasSuffix(confirm.FeedbackTo, "@b.example.com") {
		t.Fatalf("feedback goes to %q, want the VERP address", confirm.FeedbackTo)
	}
	if err := verify(confirm.Delivered()); err != nil {
		t.Fatalf("the confirmation's DKIM signature, as SES delivers it: %v\n%s", err, confirm.Data)
	}
	text := smtptest.Message{Data: confirm.Data}.Text()
	var token string
	for _, l := range linkPattern.FindAllString(text, -1) {
		if u, err := url.Parse(strings.TrimRight(l, ".\"'>")); err == nil && strings.HasPrefix(l, svc.base+"/confirm?token=") {
			token = u.Query().Get("token")
		}
	}
	if token == "" {
		t.Fatalf("no confirm link in:\n%s", text)
	}
	resp, err = http.PostForm(svc.base+"/confirm", url.Values{"token": {token}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %v %v", resp, err)
	}
	resp.Body.Close()

	welcome := ses.WaitFor(t, 2, 20*time.Second)[1]
	unsub := strings.Trim(welcome.Header.Get("List-Unsubscribe"), "<>")
	if !strings.HasPrefix(unsub, svc.base+"/unsubscribe?token=") || welcome.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" ||
		welcome.Header.Get("List-Id") == "" || welcome.Header.Get("Feedback-ID") != "" {
		t.Fatalf("the welcome's list headers (and no Feedback-ID of ours: SES writes its own): %v", welcome.Header)
	}
	if delivered, err := mail.ReadMessage(bytes.NewReader(welcome.Delivered())); err != nil || len(delivered.Header["Feedback-Id"]) != 1 {
		t.Fatalf("the welcome as SES delivers it has not one Feedback-ID: %v %v", err, delivered)
	}
	if err := verify(welcome.Delivered()); err != nil {
		t.Fatalf("the welcome's DKIM signature, as SES delivers it: %v", err)
	}
	// One-click works from the header that went through SES.
	resp, err = http.Post(unsub, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	if r := ses.Refused(); len(r) > 0 || len(ses.Messages()) != 2 {
		t.Fatalf("refused %v; %d mails, want confirm + welcome", r, len(ses.Messages()))
	}
}

// TestSESMisconfigurationRefusesToStart: no region, an unknown transport,
// or no AWS credentials stop start-up with a line naming what to set.
func TestSESMisconfigurationRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	_, redisURL := redistest.New(t, redistest.DBCommand)
	ses := sestest.Start(t, "eu-west-1")
	for want, extra := range map[string]map[string]string{
		"NEWSLETTER_SES_REGION: want the AWS region":                                {"NEWSLETTER_EMAIL_TRANSPORT": "ses"},
		"NEWSLETTER_EMAIL_TRANSPORT: want smtp or ses, got \"mailgun\"":             {"NEWSLETTER_EMAIL_TRANSPORT": "mailgun"},
		"NEWSLETTER_EMAIL_TRANSPORT=ses: no AWS credentials from the default chain": {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "eu-west-1", "NEWSLETTER_SES_ENDPOINT": ses.URL()},
		"NEWSLETTER_SMTP_URL: want unset with NEWSLETTER_EMAIL_TRANSPORT":           {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "eu-west-1", "NEWSLETTER_SMTP_URL": "smtp://127.0.0.1:1?tls=none"},
	} {
		env := realEnv(redisURL, "", extra)
		env["NEWSLETTER_ADDR"] = freeAddr(t)
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := run(ctx, []string{"worker"}, func(k string) string { return env[k] }, &out, &errb)
		cancel()
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		// The one line that says what to fix closes the output: a
		// configuration error's own line, or start-up's.
		last := strings.TrimPrefix(lines[len(lines)-1], "newsletter worker: ")
		if code == 0 || !strings.HasPrefix(last, want) {
			t.Errorf("%s: exit %d:\n%s", want, code, errb.String())
		}
	}
	if len(ses.Messages())+len(ses.Refused()) != 0 {
		t.Fatal("a service that should not have started sent something")
	}
}
