// Package keyedmac is HMAC-SHA256 under one key, reused from message to
// message. hmac.New hashes the key's inner and outer pads each time it is
// called: two of the four SHA-256 blocks a short token costs, and the
// profile of a send showed a new HMAC per link token. A Key keeps keyed
// hashes in a pool; a used one is Reset, which starts it from the pads'
// saved state instead of hashing them again.
package keyedmac

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// Size is the bytes of a whole MAC.
const Size = sha256.Size

// Key computes HMAC-SHA256 under one key. It is safe for concurrent use.
type Key struct {
	pool sync.Pool
}

// New returns a Key for key (copied: the caller may reuse its slice).
func New(key []byte) *Key {
	own := append([]byte(nil), key...)
	k := &Key{}
	k.pool.New = func() any { return hmac.New(sha256.New, own) }
	return k
}

// Sum appends to dst the MAC of the parts written one after another (as
// one message: Sum(nil, a, b) is the MAC of a followed by b).
func (k *Key) Sum(dst []byte, parts ...[]byte) []byte {
	h := k.pool.Get().(hash.Hash)
	for _, p := range parts {
		h.Write(p) // a hash's Write never fails
	}
	dst = h.Sum(dst)
	h.Reset()
	k.pool.Put(h)
	return dst
}

// SumString is Sum of one string, without copying it first.
func (k *Key) SumString(dst []byte, s string) []byte {
	h := k.pool.Get().(hash.Hash)
	if w, ok := h.(interface{ WriteString(string) (int, error) }); ok {
		_, _ = w.WriteString(s) // a hash's Write never fails
	} else {
		h.Write([]byte(s))
	}
	dst = h.Sum(dst)
	h.Reset()
	k.pool.Put(h)
	return dst
}
