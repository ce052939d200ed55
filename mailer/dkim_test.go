package mailer

import (
	"bufio"
	"bytes"
	"context"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/dkimtest"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// testKeys are dkimtest's keys as this package's tests sign with them.
type testKeys struct {
	*dkimtest.Keys
	rsa, ed email.DKIMKey
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	k := dkimtest.New(t)
	return testKeys{k, email.DKIMKey{Selector: dkimtest.RSASelector, Key: k.RSA}, email.DKIMKey{Selector: dkimtest.EdSelector, Key: k.Ed}}
}

// signedDigest renders a digest with the built-in templates, as a batch
// does, and sends it signed by signer through SMTP: the bytes a receiver
// gets.
func signedDigest(t *testing.T, signer *email.DKIM) smtptest.Message {
	t.Helper()
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := r.Render(KindDigest, Data{
		Email: "ann@example.org", Name: "Ann Lee", Topic: "Weekly digest", Period: "2026-W05",
		UnsubscribeURL: "https://news.example.com/unsubscribe?token=abc",
		PreferencesURL: "https://news.example.com/preferences?token=def",
		ListID:         "Weekly digest <digest.news.example.com>",
		Entries:        []Entry{{Title: "Release 2.0", URL: "https://news.example.com/2", Summary: "What changed"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	msg.ToName, msg.Tag = "Ann Lee", "2n9c-d-0123456789ab"
	srv := smtptest.Start(t)
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", DKIM: signer,
		ListID: "Newsletter <news.example.com>", BounceAddress: "bounces@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	return srv.WaitFor(t, 1, 5*time.Second)[0]
}

// headerNames counts the fields of raw's header by lower-cased name.
func headerNames(t *testing.T, raw []byte) map[string]int {
	t.Helper()
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw))).ReadMIMEHeader()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, v := range h {
		out[strings.ToLower(k)] = len(v)
	}
	return out
}

func TestDKIMOverSignsEveryHeader(t *testing.T) {
	keys := newTestKeys(t)
	signer, err := email.NewDKIM("example.com", keys.ed)
	if err != nil {
		t.Fatal(err)
	}
	got := signedDigest(t, signer)
	verifs, err := keys.Verify(got.Data)
	if err != nil || len(verifs) != 1 || verifs[0].Err != nil || verifs[0].Domain != "example.com" {
		t.Fatalf("the untouched mail does not verify: %v %+v\n%s", err, verifs, got.Data)
	}
	listed := map[string]int{}
	for _, k := range verifs[0].HeaderKeys {
		listed[strings.ToLower(k)]++
	}
	present := headerNames(t, got.Data)
	for _, h := range []string{"from", "to", "subject", "date", "message-id", "mime-version", "content-type",
		"list-id", "list-unsubscribe", "list-unsubscribe-post", "feedback-id", "reply-to", "cc", "sender"} {
		if listed[h] == 0 {
			t.Errorf("%s is not covered by the signature (h=%v)", h, verifs[0].HeaderKeys)
		}
	}
	for h, n := range present {
		if h != "dkim-signature" && listed[h] != n+1 {
			t.Errorf("%s occurs %d times and is listed %d times in h=, want %d", h, n, listed[h], n+1)
		}
	}
	for h, n := range listed {
		if n != present[h]+1 {
			t.Errorf("h= lists %s %d times; the mail has %d", h, n, present[h])
		}
	}
	for line := range bytes.SplitSeq(got.Data, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("a line of %d characters (RFC 5322 allows 998): %.80s…", len(line), line)
		}
	}

	// One more of any signed header, at the top or at the bottom of the
	// header, breaks the signature.
	headerEnd := bytes.Index(got.Data, []byte("\r\n\r\n")) + 2
	for h := range listed {
		field := []byte(h + ": <https://evil.example.com/u>\r\n")
		for where, forged := range map[string][]byte{
			"top":    slices.Concat(field, got.Data),
			"bottom": slices.Concat(got.Data[:headerEnd], field, got.Data[headerEnd:]),
		} {
			verifs, err := keys.Verify(forged)
			if err == nil && len(verifs) == 1 && verifs[0].Err == nil {
				t.Errorf("a %s added at the %s: the signature still verifies", h, where)
			}
		}
	}
	// And so does changing what is there.
	replace := func(old, new string) []byte {
		if !bytes.Contains(got.Data, []byte(old)) {
			t.Fatalf("the mail has no %q to tamper with:\n%s", old, got.Data)
		}
		return bytes.Replace(got.Data, []byte(old), []byte(new), 1)
	}
	for name, forged := range map[string][]byte{
		"List-Unsubscribe target": replace("token=abc", "token=evil"),
		"Content-Type":            replace("Content-Type: multipart/alternative", "Content-Type: multipart/mixed"),
		"body":                    replace("Release 2.0", "Release 6.6"),
	} {
		verifs, _ := keys.Verify(forged)
		if len(verifs) == 1 && verifs[0].Err == nil {
			t.Errorf("%s changed, and the signature still verifies", name)
		}
	}
}

func TestDKIMSignsWithTwoKeys(t *testing.T) {
	keys := newTestKeys(t)
	signer, err := email.NewDKIM("example.com", keys.rsa, keys.ed)
	if err != nil {
		t.Fatal(err)
	}
	got := signedDigest(t, signer)
	if n := headerNames(t, got.Data)["dkim-signature"]; n != 2 {
		t.Fatalf("%d DKIM-Signature fields, want one per key:\n%s", n, got.Data)
	}
	verifs, err := keys.Verify(got.Data)
	if err != nil || len(verifs) != 2 {
		t.Fatalf("verify: %v (%d signatures)", err, len(verifs))
	}
	for _, v := range verifs {
		if v.Err != nil || v.Domain != "example.com" {
			t.Errorf("a signature does not verify: %v", v.Err)
		}
	}
	for _, sel := range []string{"s=rsa2026", "s=ed2026"} {
		if !bytes.Contains(got.Data, []byte(sel)) {
			t.Errorf("no signature with %s", sel)
		}
	}
	// Each signature alone verifies: a receiver that knows only RSA
	// checks that one.
	delete(keys.Records, "ed2026._domainkey.example.com")
	verifs, _ = keys.Verify(got.Data)
	ok := 0
	for _, v := range verifs {
		if v.Err == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("without the Ed25519 record %d signatures verify, want the RSA one", ok)
	}
	forged := slices.Concat([]byte("List-Unsubscribe: <https://evil.example.com/u>\r\n"), got.Data)
	verifs, _ = keys.Verify(forged)
	for _, v := range verifs {
		if v.Err == nil {
			t.Error("a grafted List-Unsubscribe: a signature still verifies")
		}
	}
}
