package engage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// TestTokensUnchangedByTheReusedKeys: the parts and the reader hash are
// byte for byte what hmac.New under each derived key gives (issue #48
// reuses the keyed hashes; a mail must not change by a byte, and links
// already sent must keep verifying).
func TestTokensUnchangedByTheReusedKeys(t *testing.T) {
	secret := []byte("a-secret-of-the-service-0123456789")
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	mac := func(key, body []byte) []byte {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		return m.Sum(nil)
	}
	k := NewKeys(secret)
	for _, issue := range []int64{1, 300, 1 << 40} {
		for _, index := range []int{0, 7, 200} {
			b := binary.AppendUvarint(binary.AppendUvarint([]byte{byte(Link), sourceIssue}, uint64(issue)), uint64(index))
			want := enc.EncodeToString(append(b, mac(derive("newsletter engagement link v1"), b)[:macLen]...))
			if got := k.LinkPart(Link, issue, index); got != want {
				t.Fatalf("LinkPart(%d, %d) = %s, want %s", issue, index, got, want)
			}
		}
		for _, reader := range []int64{1, 123456789} {
			sent := time.Unix(1_800_000_000, 0)
			b := binary.AppendUvarint(binary.AppendUvarint(nil, uint64(reader)), uint64(sent.Unix()))
			signed := append(binary.AppendUvarint([]byte{sourceIssue}, uint64(issue)), b...)
			want := enc.EncodeToString(append(b, mac(derive("newsletter engagement reader v1"), signed)[:macLen]...))
			if got := k.ReaderPart(issue, reader, sent); got != want {
				t.Fatalf("ReaderPart(%d, %d) = %s, want %s", issue, reader, got, want)
			}
			hash := enc.EncodeToString(mac(derive("newsletter engagement reader hash v1"), binary.AppendUvarint(nil, uint64(reader)))[:12])
			if got := k.ReaderHash(reader); got != hash {
				t.Fatalf("ReaderHash(%d) = %s, want %s", reader, got, hash)
			}
		}
	}
}
