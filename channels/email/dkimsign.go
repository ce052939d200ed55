package email

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/mailheader"
)

// The signature is made here rather than by go-msgauth's Signer, which the
// tests keep as the verifier. Its Signer reads the whole message through a
// pipe into a goroutine of its own, per key, and canonicalizes the body a
// byte at a time: for an 8 KB digest that was most of what an Ed25519
// signature cost (about 135 µs of CPU a mail, the signature itself a
// fraction), and with two keys the body was read twice. Here the body is
// canonicalized by lines and hashed once for all keys; and a prepared
// mail's body hash starts from the state after its template's shared
// beginning, computed once (mailer/encode.go, through BodyHash). What is
// signed (signedHeaders) and how (relaxed/relaxed, SHA-256, RSA or Ed25519
// per RFC 6376 and RFC 8463) is as before.

// relaxedBody is RFC 6376's relaxed body canonicalization (section 3.4.4)
// feeding SHA-256, as go-msgauth's: whitespace at the end of lines is
// dropped, runs of it become one space, a lone LF becomes CRLF, empty lines
// at the end are dropped, and a body that does not end in CRLF gets one.
// Its state can be copied (clone) part way.
type relaxedBody struct {
	h hash.Hash
	// out is canonical body not yet hashed: written to the hash in large
	// pieces, as many small writes cost more than the copy.
	out []byte
	// pending are line breaks not yet in out: dropped if nothing but
	// empty lines follows them.
	pending []byte
	wsp     bool // whitespace since the last byte put out
	written bool // something was put out
	cr      bool // the last byte was a CR
}

func newRelaxedBody() *relaxedBody {
	return &relaxedBody{h: sha256.New(), out: make([]byte, 0, relaxedChunk+128)}
}

// relaxedChunk is how much canonical body is collected before hashing it.
const relaxedChunk = 4096

// bodyClass sorts bytes for relaxedBody: 0 any other, 1 space or tab, 2 CR,
// 3 LF.
var bodyClass = func() (c [256]uint8) {
	c[' '], c['\t'], c['\r'], c['\n'] = 1, 1, 2, 3
	return c
}()

func (c *relaxedBody) write(b []byte) {
	for i := 0; i < len(b); {
		switch bodyClass[b[i]] {
		case 0:
			j := i + 1
			for j < len(b) && bodyClass[b[j]] == 0 {
				j++
			}
			if len(c.pending) > 0 {
				c.out = append(c.out, c.pending...)
				c.pending = c.pending[:0]
			}
			if c.wsp {
				c.out = append(c.out, ' ')
				c.wsp = false
			}
			c.out = append(c.out, b[i:j]...)
			if len(c.out) >= relaxedChunk {
				c.h.Write(c.out)
				c.out = c.out[:0]
			}
			c.written, c.cr = true, false
			i = j
		case 1:
			c.wsp, c.cr = true, false
			i++
		case 2:
			c.pending = append(c.pending, '\r')
			c.wsp, c.cr = false, true
			i++
		case 3:
			if !c.cr {
				c.pending = append(c.pending, '\r')
			}
			c.pending = append(c.pending, '\n')
			c.wsp, c.cr = false, false
			i++
		}
	}
}

// sum finishes the canonical body and returns its SHA-256.
func (c *relaxedBody) sum() []byte {
	if c.written {
		c.out = append(c.out, '\r', '\n')
	}
	c.h.Write(c.out)
	c.out = c.out[:0]
	return c.h.Sum(nil)
}

// clone is an independent copy of c.
func (c *relaxedBody) clone() (*relaxedBody, error) {
	h, err := c.h.(hash.Cloner).Clone()
	if err != nil {
		return nil, err
	}
	d := *c
	d.h, d.pending = h, bytes.Clone(c.pending)
	d.out = append(make([]byte, 0, relaxedChunk+128), c.out...)
	return &d, nil
}

// Write, Sum, Reset, Size, BlockSize and Clone make relaxedBody a
// hash.Cloner: the composer (mailer) hashes a prepared mail's body through
// DKIM.BodyHash without importing this package, and goes on from a copy
// of its template's shared beginning.

func (c *relaxedBody) Write(b []byte) (int, error) {
	c.write(b)
	return len(b), nil
}

// Sum appends the hash of the canonical body so far to b, leaving c as it
// was (hash.Hash's rule): the finishing CRLF goes into a copy.
func (c *relaxedBody) Sum(b []byte) []byte {
	h, err := c.h.(hash.Cloner).Clone()
	if err != nil {
		// SHA-256 always copies; a hash that cannot is a programming error.
		panic(err)
	}
	h.Write(c.out)
	if c.written {
		h.Write([]byte("\r\n"))
	}
	return h.Sum(b)
}

func (c *relaxedBody) Reset() { *c = *newRelaxedBody() }

func (c *relaxedBody) Size() int { return sha256.Size }

func (c *relaxedBody) BlockSize() int { return sha256.BlockSize }

func (c *relaxedBody) Clone() (hash.Cloner, error) { return c.clone() }

// BodyHash returns a fresh relaxed SHA-256 of a body, as the signatures'
// bh= takes it; SignHashed signs with its Sum.
func (d *DKIM) BodyHash() hash.Cloner { return newRelaxedBody() }

// SignHashed is Sign for a body whose relaxed SHA-256 (BodyHash) is bh.
func (d *DKIM) SignHashed(header, bh []byte) ([]byte, error) { return d.sign(header, bh) }

// relaxedBodyHash is the relaxed SHA-256 of body.
func relaxedBodyHash(body []byte) []byte {
	c := newRelaxedBody()
	c.write(body)
	return c.sum()
}

// appendRelaxedHeader appends field ("Name: value", perhaps folded, with
// or without its final CRLF) in relaxed canonical form with CRLF: the name
// lower-cased, the value unfolded, runs of whitespace one space, none at
// either end.
func appendRelaxedHeader(dst []byte, field []byte) []byte {
	name, value, _ := bytes.Cut(field, []byte(":"))
	dst = append(dst, strings.ToLower(string(bytes.TrimSpace(name)))...)
	dst = append(dst, ':')
	sep := false
	for _, w := range bytes.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' }) {
		if sep {
			dst = append(dst, ' ')
		}
		dst = append(dst, w...)
		sep = true
	}
	return append(dst, '\r', '\n')
}

// headerFields splits a header block into its fields, each with its folded
// lines and final CRLF.
func headerFields(header []byte) [][]byte {
	var out [][]byte
	for len(header) > 0 {
		n := mailheader.FieldLen(header)
		out = append(out, header[:n])
		header = header[n:]
	}
	return out
}

// signedData is the canonical header data the signature covers, before
// the DKIM-Signature field itself: for each name in names, the next
// instance of it from the bottom of the header (none past the last: the
// oversigned listing).
func signedData(fields [][]byte, names []string) []byte {
	byName := map[string][]int{}
	for i, f := range fields {
		name, _, _ := bytes.Cut(f, []byte(":"))
		k := strings.ToLower(string(bytes.TrimSpace(name)))
		byName[k] = append(byName[k], i)
	}
	var out []byte
	for _, n := range names {
		k := strings.ToLower(n)
		if at := byName[k]; len(at) > 0 {
			out = appendRelaxedHeader(out, fields[at[len(at)-1]])
			byName[k] = at[:len(at)-1]
		}
	}
	return out
}

// sign returns a DKIM-Signature field per key, each ending in CRLF, for a
// message with header (its fields) whose body's relaxed SHA-256 is bh.
func (d *DKIM) sign(header, bh []byte) ([]byte, error) {
	names := slices.DeleteFunc(signedHeaders(header), func(k string) bool { return d.leave[strings.ToLower(k)] })
	data := signedData(headerFields(header), names)
	t := strconv.FormatInt(time.Now().Unix(), 10)
	var out []byte
	for _, k := range d.keys {
		alg, opts := "rsa-sha256", crypto.Hash(crypto.SHA256)
		if _, ok := k.Key.Public().(ed25519.PublicKey); ok {
			// RFC 8463: Ed25519 signs the SHA-256 hash, as is.
			alg, opts = "ed25519-sha256", crypto.Hash(0)
		}
		field := dkimField(alg, d.domain, k.Selector, t, names, bh)
		h := sha256.New()
		h.Write(data)
		canon := appendRelaxedHeader(nil, field)
		h.Write(canon[:len(canon)-2]) // the field itself without its CRLF
		sig, err := k.Key.Sign(rand.Reader, h.Sum(nil), opts)
		if err != nil {
			return nil, fmt.Errorf("dkim: selector %s: %w", k.Selector, err)
		}
		out = append(out, field...)
		out = appendFolded(out, base64.StdEncoding.EncodeToString(sig), len("b="))
		out = append(out, '\r', '\n')
	}
	return out, nil
}

// dkimField is a DKIM-Signature field up to its empty b= tag, folded to
// lines of at most 78 characters: between tags, at the colons of h= and
// within bh= (RFC 6376 allows whitespace there; a verifier drops it).
func dkimField(alg, domain, selector, t string, names []string, bh []byte) []byte {
	f := []byte("DKIM-Signature: v=1; a=" + alg + "; c=relaxed/relaxed; d=" + domain + ";")
	col := len(f)
	tag := func(s string) {
		if col+1+len(s) > 76 {
			f = append(f, "\r\n"...)
			col = 0
		}
		f = append(f, ' ')
		f = append(f, s...)
		col += 1 + len(s)
	}
	tag("s=" + selector + ";")
	tag("t=" + t + ";")
	tag("h=" + names[0])
	for _, n := range names[1:] {
		if col+1+len(n) > 76 {
			f = append(f, "\r\n "...)
			col = 1
		}
		f = append(f, ':')
		f = append(f, n...)
		col += 1 + len(n)
	}
	f = append(f, ";\r\n bh="...)
	f = appendFolded(f, base64.StdEncoding.EncodeToString(bh), len(" bh="))
	return append(f, ";\r\n b="...)
}

// appendFolded appends a base64 value that starts at column col, folded to
// lines of at most 76 characters.
func appendFolded(dst []byte, v string, col int) []byte {
	for len(v) > 0 {
		n := min(len(v), 76-col)
		if n <= 0 {
			dst = append(dst, "\r\n "...)
			col = 1
			continue
		}
		dst = append(dst, v[:n]...)
		v = v[n:]
		col += n
	}
	return dst
}
