package keyedmac

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
)

func reference(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// TestSumIsHMAC checks every way of writing a message against hmac.New,
// for keys shorter and longer than a block, and a Key used again and
// again (its reset state must not leak one message into the next).
func TestSumIsHMAC(t *testing.T) {
	for _, key := range [][]byte{[]byte("k"), make([]byte, 64), make([]byte, 200)} {
		k := New(key)
		for i, msg := range []string{"", "a", "engagement token body", string(make([]byte, 300)), "a"} {
			want := reference(key, msg)
			if got := k.Sum(nil, []byte(msg)); !hmac.Equal(got, want) {
				t.Fatalf("key %d bytes, message %d: Sum %x, want %x", len(key), i, got, want)
			}
			if got := k.SumString([]byte("prefix"), msg); string(got[:6]) != "prefix" || !hmac.Equal(got[6:], want) {
				t.Fatalf("key %d bytes, message %d: SumString %x, want prefix+%x", len(key), i, got, want)
			}
			if len(msg) > 1 {
				if got := k.Sum(nil, []byte(msg[:1]), []byte(msg[1:])); !hmac.Equal(got, want) {
					t.Fatalf("key %d bytes, message %d in two parts: %x, want %x", len(key), i, got, want)
				}
			}
		}
	}
}

// TestKeyCopied: the caller's key slice changed afterwards changes nothing.
func TestKeyCopied(t *testing.T) {
	key := []byte("secret-key")
	k := New(key)
	key[0] = 'X'
	if got, want := k.Sum(nil, []byte("m")), reference([]byte("secret-key"), "m"); !hmac.Equal(got, want) {
		t.Fatalf("after the caller changed its slice: %x, want %x", got, want)
	}
}

// TestConcurrent: one Key from many goroutines gives each its own answer
// (run under -race).
func TestConcurrent(t *testing.T) {
	key := []byte("shared")
	k := New(key)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				msg := fmt.Sprintf("g%d-%d", g, i)
				if !hmac.Equal(k.Sum(nil, []byte(msg)), reference(key, msg)) {
					errs <- msg
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Errorf("wrong MAC of %q under concurrent use", msg)
	}
}

func BenchmarkNewEachTime(b *testing.B) {
	key, msg := make([]byte, 32), []byte("0123456789abcdef")
	for b.Loop() {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		_ = m.Sum(nil)
	}
}

func BenchmarkKeySum(b *testing.B) {
	key, msg := make([]byte, 32), []byte("0123456789abcdef")
	k := New(key)
	var buf [Size]byte
	for b.Loop() {
		_ = k.Sum(buf[:0], msg)
	}
}
