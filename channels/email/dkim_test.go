package email

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/newsletter/newsletter/channels/email/dkimtest"
)

// testKeys are dkimtest's keys as this package's tests sign with them.
type testKeys struct {
	*dkimtest.Keys
	rsa, ed DKIMKey
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	k := dkimtest.New(t)
	return testKeys{k, DKIMKey{Selector: dkimtest.RSASelector, Key: k.RSA}, DKIMKey{Selector: dkimtest.EdSelector, Key: k.Ed}}
}

// TestSignMessageVerifies: a message signed on its own, with an RSA and
// an Ed25519 key, verifies with go-msgauth; SignHashed over BodyHash's sum
// signs the same body hash, and Sum leaves the hash as it was.
func TestSignMessageVerifies(t *testing.T) {
	keys := newTestKeys(t)
	d, err := NewDKIM("example.com", keys.rsa, keys.ed)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("From: News <news@example.com>\r\nTo: a@example.org\r\nSubject: hi\r\n\r\nHello \t there\r\n\r\n")
	sig, err := d.SignMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	verifs, err := keys.Verify(append(sig, msg...))
	if err != nil || len(verifs) != 2 {
		t.Fatalf("%v, %d signatures", err, len(verifs))
	}
	for _, v := range verifs {
		if v.Err != nil {
			t.Fatalf("a signature does not verify: %v", v.Err)
		}
	}
	h := d.BodyHash()
	h.Write([]byte("Hello \t there\r\n"))
	first := h.Sum(nil)
	if again := h.Sum(nil); !bytes.Equal(first, again) {
		t.Fatalf("Sum changed the hash: %x, then %x", first, again)
	}
	h.Write([]byte("\r\n"))
	if got, want := h.Sum(nil), relaxedBodyHash([]byte("Hello \t there\r\n\r\n")); !bytes.Equal(got, want) {
		t.Fatalf("BodyHash %x, want %x", got, want)
	}
	if _, err := d.SignHashed(msg[:bytes.Index(msg, []byte("\r\n\r\n"))+2], first); err != nil {
		t.Fatal(err)
	}
}

func TestNewDKIMRefusesIncompleteKeys(t *testing.T) {
	keys := newTestKeys(t)
	for name, err := range map[string]error{
		"no domain":   func() error { _, err := NewDKIM("", keys.rsa); return err }(),
		"no key":      func() error { _, err := NewDKIM("example.com"); return err }(),
		"no selector": func() error { _, err := NewDKIM("example.com", DKIMKey{Key: keys.rsa.Key}); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDKIMKeyFile(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "dkim.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ReadDKIMKey(keyFile)
	if err != nil || (DKIMKey{Key: key}).Algorithm() != "ed25519" {
		t.Fatalf("read %v: %v", key, err)
	}
	if _, err := ReadDKIMKey(filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Fatal("a missing key file was read")
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDKIMKey(bad); err == nil {
		t.Fatal("a file without a key was read")
	}
}
