package engage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/keyedmac"
)

// What a link part is for.
type What byte

// The kinds of link part: a link of the body, the hidden honeypot link no
// person sees, the open pixel.
const (
	Link     What = 'l'
	Honeypot What = 'h'
	Pixel    What = 'o'
)

// sourceIssue is the source kind of an issue's links (a digest is an
// issue too; a topic event counts under an engagement id taken from the
// issues' ids, so its link is of this kind as well). The byte leaves room
// for other sources.
const sourceIssue = 'i'

// macLen is the bytes of each part's MAC: 64 bits, as a guess at a link
// costs a request to the service, never an offline try.
const macLen = 8

// ErrInvalid: a token we did not sign (or one for another route).
var ErrInvalid = errors.New("engagement token is not valid")

var enc = base64.RawURLEncoding.Strict()

// Keys sign and check the tokens, and hash readers for the unique counts.
// Each is derived from the service's secret (NEWSLETTER_SECRET) for this
// use alone, as internal/token derives its own.
type Keys struct {
	link, reader, readerHash *keyedmac.Key
}

// NewKeys derives the keys from the service's secret.
func NewKeys(secret []byte) *Keys {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	return &Keys{
		link:       keyedmac.New(derive("newsletter engagement link v1")),
		reader:     keyedmac.New(derive("newsletter engagement reader v1")),
		readerHash: keyedmac.New(derive("newsletter engagement reader hash v1")),
	}
}

// LinkPart is the part of a token shared by every reader: what, the
// issue and the link's index.
func (k *Keys) LinkPart(what What, issue int64, index int) string {
	b := []byte{byte(what), sourceIssue}
	b = binary.AppendUvarint(b, uint64(issue))
	b = binary.AppendUvarint(b, uint64(index))
	return enc.EncodeToString(appendSum(b, k.link, b))
}

// ReaderPart is the part of a token shared by every link of one reader's
// mail: their id and when the mail was made, bound to the issue (a
// reader part of one issue does not verify with another's links).
func (k *Keys) ReaderPart(issue int64, reader int64, sent time.Time) string {
	b := binary.AppendUvarint(nil, uint64(reader))
	b = binary.AppendUvarint(b, uint64(max(0, sent.Unix())))
	return enc.EncodeToString(appendSum(b, k.reader, readerSigned(issue, b)))
}

// A test send's links (and a preview's) go through the redirect too, so
// the tester sees what readers get, but they name no reader and no
// stored link: the token signs the issue, the day it was made and the
// target, which the URL carries (TestLink). The redirect leads to it and
// counts nothing, for TestLinkTTL: a signed redirect to any address an
// editor typed must not stay one for ever.
const testWhat = 't'

// TestLinkTTL is how long a test link leads on.
const TestLinkTTL = 30 * 24 * time.Hour

// TestLink is the URL, under base, of a test send's link to target in
// issue, made at made: base/r/<token>?u=<target>.
func (k *Keys) TestLink(base string, issue int64, target string, made time.Time) string {
	b := []byte{testWhat, sourceIssue}
	b = binary.AppendUvarint(b, uint64(issue))
	b = binary.AppendUvarint(b, uint64(max(0, made.Unix())))
	return base + "/r/" + enc.EncodeToString(appendSum(b, k.link, testSigned(b, target))) + "?u=" + url.QueryEscape(target)
}

// ParseTest verifies a test link's token against its target and answers
// its issue; ErrInvalid for anything we did not sign, or made more than
// TestLinkTTL before now.
func (k *Keys) ParseTest(tok, target string, now time.Time) (int64, error) {
	b, ok := decode(tok)
	if !ok || len(b) < 3+macLen || b[0] != testWhat || b[1] != sourceIssue || target == "" {
		return 0, ErrInvalid
	}
	body, mac := b[:len(b)-macLen], b[len(b)-macLen:]
	if !hmac.Equal(mac, sum(k.link, testSigned(body, target))) {
		return 0, ErrInvalid
	}
	issue, made, ok := uvarints(body[2:])
	if !ok || issue == 0 || issue > 1<<62 || made > 1<<40 {
		return 0, ErrInvalid
	}
	if age := now.Sub(time.Unix(int64(made), 0)); age > TestLinkTTL || age < -time.Hour {
		return 0, ErrInvalid
	}
	return int64(issue), nil
}

// testSigned is what a test link's MAC covers: its body, then the target
// (no body ends where a target could begin: its last byte is a uvarint's,
// below 0x80, and the separator is 0xff).
func testSigned(body []byte, target string) []byte {
	return append(append(append([]byte(nil), body...), 0xff), target...)
}

// Token joins the two parts as the URL carries them.
func Token(linkPart, readerPart string) string { return linkPart + "." + readerPart }

// Click is what a verified token names.
type Click struct {
	What   What
	Issue  int64
	Index  int
	Reader int64
	Sent   time.Time
}

// Parse verifies tok and answers what it names; ErrInvalid for anything
// we did not sign.
func (k *Keys) Parse(tok string) (Click, error) {
	lp, rp, ok := strings.Cut(tok, ".")
	if !ok {
		return Click{}, ErrInvalid
	}
	lb, ok1 := decode(lp)
	rb, ok2 := decode(rp)
	if !ok1 || !ok2 || len(lb) < 2+2+macLen || len(rb) < 2+macLen {
		return Click{}, ErrInvalid
	}
	lbody, lmac := lb[:len(lb)-macLen], lb[len(lb)-macLen:]
	if !hmac.Equal(lmac, sum(k.link, lbody)) || lbody[1] != sourceIssue {
		return Click{}, ErrInvalid
	}
	c := Click{What: What(lbody[0])}
	issue, index, ok := uvarints(lbody[2:])
	if !ok || issue == 0 || issue > 1<<62 || index > 1<<20 {
		return Click{}, ErrInvalid
	}
	c.Issue, c.Index = int64(issue), int(index)
	rbody, rmac := rb[:len(rb)-macLen], rb[len(rb)-macLen:]
	if !hmac.Equal(rmac, sum(k.reader, readerSigned(c.Issue, rbody))) {
		return Click{}, ErrInvalid
	}
	reader, sent, ok := uvarints(rbody)
	if !ok || reader == 0 || reader > 1<<62 || sent > 1<<40 {
		return Click{}, ErrInvalid
	}
	c.Reader, c.Sent = int64(reader), time.Unix(int64(sent), 0)
	switch c.What {
	case Link, Honeypot, Pixel:
		return c, nil
	}
	return Click{}, ErrInvalid
}

// ReaderHash is the reader's keyed hash, the member of the unique
// counts: the same reader is the same member in every issue, and the id
// cannot be read back from it without the secret.
func (k *Keys) ReaderHash(reader int64) string {
	return enc.EncodeToString(k.readerHash.Sum(nil, binary.AppendUvarint(nil, uint64(reader)))[:12])
}

func readerSigned(issue int64, body []byte) []byte {
	return append(binary.AppendUvarint([]byte{sourceIssue}, uint64(issue)), body...)
}

// uvarints reads exactly two canonical uvarints.
func uvarints(b []byte) (a, c uint64, ok bool) {
	a, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, false
	}
	c, m := binary.Uvarint(b[n:])
	if m <= 0 || n+m != len(b) {
		return 0, 0, false
	}
	return a, c, true
}

func decode(s string) ([]byte, bool) {
	b, err := enc.DecodeString(s)
	if err != nil || enc.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

// sum is body's MAC under key, cut to macLen. A send signs a reader part
// per mail, so the key's hash is reused (keyedmac), not made anew.
func sum(key *keyedmac.Key, body []byte) []byte { return appendSum(nil, key, body) }

// appendSum appends body's cut MAC to dst (which may be body itself: the
// MAC is taken before dst grows).
func appendSum(dst []byte, key *keyedmac.Key, body []byte) []byte {
	var whole [keyedmac.Size]byte
	return append(dst, key.Sum(whole[:0], body)[:macLen]...)
}
