package webpush_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/newsletter/newsletter/channels/webpush"
)

// A point on P-256 (RFC 8291's browser key) and a valid secret.
const (
	goodP256DH = rfcUAPublic
	goodAuth   = rfcAuth
)

func subJSON(endpoint, p256dh, auth string) string {
	b, _ := json.Marshal(map[string]any{"endpoint": endpoint, "expirationTime": nil,
		"keys": map[string]string{"p256dh": p256dh, "auth": auth}})
	return string(b)
}

func TestParseSubscription(t *testing.T) {
	s, err := webpush.ParseSubscription([]byte(subJSON("https://push.example.net/abc", goodP256DH, goodAuth)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Endpoint != "https://push.example.net/abc" || len(s.P256DH) != 65 || len(s.Auth) != 16 {
		t.Fatalf("%+v", s)
	}
	// Padding and the standard alphabet, as some libraries write keys.
	std := base64.StdEncoding.EncodeToString(s.P256DH)
	if _, err := webpush.ParseSubscription([]byte(subJSON("https://push.example.net/abc", std, goodAuth+"=="))); err != nil {
		t.Fatalf("padded standard base64: %v", err)
	}
	// It writes back what it read.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := webpush.ParseSubscription(b)
	if err != nil || again.Endpoint != s.Endpoint || string(again.P256DH) != string(s.P256DH) {
		t.Fatalf("round trip %s: %+v %v", b, again, err)
	}

	offCurve := make([]byte, 65)
	offCurve[0] = 4
	offCurve[64] = 1
	compressed := append([]byte{2}, s.P256DH[1:33]...)
	enc := base64.RawURLEncoding.EncodeToString
	for name, body := range map[string]string{
		"not JSON":         `{"endpoint":`,
		"an array":         `[1,2]`,
		"two objects":      subJSON("https://p.example/a", goodP256DH, goodAuth) + `{}`,
		"no endpoint":      subJSON("", goodP256DH, goodAuth),
		"relative":         subJSON("/push/abc", goodP256DH, goodAuth),
		"ftp":              subJSON("ftp://push.example.net/abc", goodP256DH, goodAuth),
		"huge endpoint":    subJSON("https://push.example.net/"+strings.Repeat("a", 3000), goodP256DH, goodAuth),
		"no keys":          `{"endpoint":"https://push.example.net/abc"}`,
		"p256dh not b64":   subJSON("https://push.example.net/abc", "!!!", goodAuth),
		"p256dh short":     subJSON("https://push.example.net/abc", enc(s.P256DH[:64]), goodAuth),
		"p256dh long":      subJSON("https://push.example.net/abc", enc(append(s.P256DH, 0)), goodAuth),
		"p256dh compressd": subJSON("https://push.example.net/abc", enc(compressed), goodAuth),
		"p256dh off curve": subJSON("https://push.example.net/abc", enc(offCurve), goodAuth),
		"auth short":       subJSON("https://push.example.net/abc", goodP256DH, enc(s.Auth[:15])),
		"auth long":        subJSON("https://push.example.net/abc", goodP256DH, enc(append(s.Auth, 1))),
		"keys not strings": `{"endpoint":"https://push.example.net/abc","keys":{"p256dh":1,"auth":2}}`,
	} {
		if _, err := webpush.ParseSubscription([]byte(body)); !errors.Is(err, webpush.ErrBadSubscription) {
			t.Errorf("%s: err = %v, want ErrBadSubscription", name, err)
		}
	}
}

func TestNewVAPID(t *testing.T) {
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	pub2, priv2, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	if len(pub) != 87 || len(priv) != 43 || strings.ContainsAny(pub+priv, "=+/") {
		t.Fatalf("keys %q %q: want unpadded base64url of 65 and 32 bytes", pub, priv)
	}
	v, err := webpush.NewVAPID(pub, priv, "mailto:ops@example.com")
	if err != nil || v.PublicKey() != pub {
		t.Fatalf("%v, %v", v, err)
	}
	for name, tc := range map[string]struct {
		pub, priv, sub string
		want           error
	}{
		"public not b64":     {"***", priv, "mailto:a@b.example", webpush.ErrVAPIDPublicKey},
		"public short":       {pub[:80], priv, "mailto:a@b.example", webpush.ErrVAPIDPublicKey},
		"private short":      {pub, priv[:40], "mailto:a@b.example", webpush.ErrVAPIDPrivateKey},
		"private empty":      {pub, "", "mailto:a@b.example", webpush.ErrVAPIDPrivateKey},
		"mismatched":         {pub, priv2, "mailto:a@b.example", webpush.ErrVAPIDMismatch},
		"mismatched too":     {pub2, priv, "mailto:a@b.example", webpush.ErrVAPIDMismatch},
		"bare address":       {pub, priv, "ops@example.com", webpush.ErrVAPIDSubject},
		"mailto twice":       {pub, priv, "mailto:mailto:ops@example.com", webpush.ErrVAPIDSubject},
		"http subject":       {pub, priv, "http://example.com", webpush.ErrVAPIDSubject},
		"named mailto":       {pub, priv, "mailto:Ops <ops@example.com>", webpush.ErrVAPIDSubject},
		"empty subject":      {pub, priv, "", webpush.ErrVAPIDSubject},
		"https without host": {pub, priv, "https://", webpush.ErrVAPIDSubject},
	} {
		if _, err := webpush.NewVAPID(tc.pub, tc.priv, tc.sub); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	if _, err := webpush.NewVAPID(pub, priv, "https://news.example.com/contact"); err != nil {
		t.Fatalf("https subject: %v", err)
	}
}

func TestNotificationPayload(t *testing.T) {
	b, err := webpush.EventNotification("Deploy finished", "https://app.example.com/d/1").Payload()
	if err != nil || string(b) != `{"title":"Deploy finished","url":"https://app.example.com/d/1"}` {
		t.Fatalf("%s, %v", b, err)
	}
	// A long title is cut at a character, and text that JSON escapes
	// many times over still fits.
	for _, title := range []string{strings.Repeat("ü", 3000), strings.Repeat("\x01", 4000), strings.Repeat(`"`, 4000)} {
		b, err := webpush.Notification{Title: title, Body: title, URL: "https://x.example/"}.Payload()
		if err != nil || len(b) > webpush.MaxPayload {
			t.Fatalf("payload of %d bytes, %v", len(b), err)
		}
		var n webpush.Notification
		if err := json.Unmarshal(b, &n); err != nil || !utf8.ValidString(n.Title) || !strings.HasSuffix(n.Title, "…") {
			t.Fatalf("%q, %v", n.Title, err)
		}
	}
	if _, err := (webpush.Notification{Title: "t", URL: "https://x.example/" + strings.Repeat("a", 4000)}).Payload(); !errors.Is(err, webpush.ErrTooLarge) {
		t.Fatalf("a URL too long: %v", err)
	}
}
