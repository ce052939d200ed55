package email

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// msgauthBodyHash is go-msgauth's relaxed body hash of body: the bh= of a
// signature its own Signer makes.
func msgauthBodyHash(t testing.TB, body []byte) []byte {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dkim.NewSigner(&dkim.SignOptions{Domain: "example.com", Selector: "s", Signer: key,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(append([]byte("From: a@example.com\r\n\r\n"), body...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tag := range strings.Split(strings.NewReplacer("\r\n", "", " ", "").Replace(s.Signature()), ";") {
		if v, ok := strings.CutPrefix(tag, "bh="); ok {
			bh, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Fatal(err)
			}
			return bh
		}
	}
	t.Fatalf("no bh= in %s", s.Signature())
	return nil
}

var bodySamples = []string{
	"",
	"\r\n",
	"\r\n\r\n\r\n",
	"no line break at the end",
	"line\r\n",
	"trailing space \r\ntrailing tab\t\r\n  leading  and   inner  \t runs\r\n",
	"empty lines at the end\r\n\r\n \r\n\t\r\n",
	"lone LF\nlone CR\rCRLF\r\n\r\r\n\n",
	"whitespace only \t ",
	"=\r\n.dot\r\n--boundary--\r\n",
	strings.Repeat("A line of a newsletter digest=\r\n", 50) + "\r\n\r\n",
}

// TestRelaxedBodyHashMatchesGoMsgauth: our relaxed body canonicalization
// gives go-msgauth's body hash, for bodies with every kind of whitespace
// and line break, fed whole or cut anywhere with the state copied at the
// cut (as a prepared mail's hash goes on from its template's).
func TestRelaxedBodyHashMatchesGoMsgauth(t *testing.T) {
	for _, body := range bodySamples {
		want := msgauthBodyHash(t, []byte(body))
		if got := relaxedBodyHash([]byte(body)); !bytes.Equal(got, want) {
			t.Fatalf("%q: body hash %x, go-msgauth's %x", body, got, want)
		}
		for cut := 0; cut <= len(body); cut++ {
			c := newRelaxedBody()
			c.write([]byte(body[:cut]))
			d, err := c.clone()
			if err != nil {
				t.Fatal(err)
			}
			c.write([]byte("something else entirely\r\n")) // the original goes on elsewhere
			d.write([]byte(body[cut:]))
			if got := d.sum(); !bytes.Equal(got, want) {
				t.Fatalf("%q cut at %d: body hash %x, want %x", body, cut, got, want)
			}
		}
	}
}

func FuzzRelaxedBodyHash(f *testing.F) {
	for _, s := range bodySamples {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, body string, cut uint8) {
		want := msgauthBodyHash(t, []byte(body))
		c := newRelaxedBody()
		at := min(int(cut), len(body))
		c.write([]byte(body[:at]))
		d, err := c.clone()
		if err != nil {
			t.Fatal(err)
		}
		d.write([]byte(body[at:]))
		if got := d.sum(); !bytes.Equal(got, want) {
			t.Fatalf("%q: %x, want %x", body, got, want)
		}
	})
}

// BenchmarkDKIMSign: a signature of an 8 KB mail, made here and by
// go-msgauth's Signer (which this package used before), per key kind.
func BenchmarkDKIMSign(b *testing.B) {
	keys := newTestKeys(b)
	mail := []byte("From: a@example.com\r\nTo: b@example.org\r\nSubject: hi\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n" +
		strings.Repeat("A line of a newsletter digest, long enough to look like one=\r\n", 130))
	header := mail[:bytes.Index(mail, []byte("\r\n\r\n"))+2]
	for _, k := range []DKIMKey{keys.rsa, keys.ed} {
		d, err := NewDKIM("example.com", k)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(k.Algorithm()+"/here", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.SignMessage(mail); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(k.Algorithm()+"/go-msgauth", func(b *testing.B) {
			for b.Loop() {
				s, err := dkim.NewSigner(&dkim.SignOptions{Domain: "example.com", Selector: k.Selector, Signer: k.Key,
					HeaderKeys: signedHeaders(header), HeaderCanonicalization: dkim.CanonicalizationRelaxed,
					BodyCanonicalization: dkim.CanonicalizationRelaxed})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Write(mail); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
