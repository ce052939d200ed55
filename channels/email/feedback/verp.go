package feedback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// kindCodes are the mail kinds as one letter in a tag. Any other kind (a
// step of the onboarding sequence, whose names the operator chooses in the
// topics file) is tagged too, with stepCode: every mail carries a tag, so
// every bounce can be traced, and a tag stays short enough for the 64
// characters of a local part whatever the step is called.
var kindCodes = map[string]string{"confirm": "c", "welcome": "w", "digest": "d", "events": "e", "unsubscribe": "u", "issue": "i", "preferences": "p"}

// stepCode is the letter of every other kind; such a tag reads back as
// KindStep.
const stepCode = "s"

// KindStep is the kind Parse gives for a tag of a mail whose kind has no
// letter of its own: a step of the onboarding sequence after the welcome.
const KindStep = "sequence-step"

// KindTest is the kind of a test send's tag (TestTag): the mail went to a
// tester, no subscriber, so a bounce or complaint about it changes
// nobody's subscription and counts against nothing.
const KindTest = "test"

// testCode is the letter of a test send's tag.
const testCode = "t"

// inviteCode is the letter of a console invite's tag (InviteTag).
const inviteCode = "a"

func codeOf(kind string) (string, bool) {
	if code, ok := kindCodes[kind]; ok {
		return code, true
	}
	return stepCode, kind != ""
}

// Tagger makes and reads the tags that trace a mail to its subscriber:
// "<id base 36>-<kind letter>-<MAC>", 12 hex digits of an HMAC-SHA256
// over both, so nobody without the secret can make one.
type Tagger struct {
	key []byte
}

// NewTagger derives the tag key from the service's secret.
func NewTagger(secret []byte) *Tagger {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("newsletter verp tag key"))
	return &Tagger{key: m.Sum(nil)}
}

func (t *Tagger) mac(id, code string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(id + "-" + code))
	return hex.EncodeToString(m.Sum(nil)[:6])
}

// sign is the tag of subscriber s (base 36) with kind code: the one place
// that lays a tag out, so Tag and IssueTag cannot drift from what Trace
// reads back.
func (t *Tagger) sign(s, code string) string { return s + "-" + code + "-" + t.mac(s, code) }

// Tag is the tag of a mail of kind to subscriber id ("" without a kind or
// an id).
func (t *Tagger) Tag(id int64, kind string) string {
	code, ok := codeOf(kind)
	if t == nil || !ok || id <= 0 {
		return ""
	}
	return t.sign(strconv.FormatInt(id, 36), code)
}

// IssueTag is the tag of a mail of issue to subscriber id: the issue's
// letter followed by the issue's id ("<id>-i<issue>-<MAC>", both base
// 36), so a late bounce or complaint counts against that issue. The MAC
// covers the issue too: nobody can move a report to another issue.
func (t *Tagger) IssueTag(id, issue int64) string {
	if t == nil || id <= 0 || issue <= 0 {
		return ""
	}
	return t.sign(strconv.FormatInt(id, 36), kindCodes["issue"]+strconv.FormatInt(issue, 36))
}

// TestTag is the tag of a test send of issue: "<issue>-t-<MAC>". It
// names no subscriber (the tester is none), so a report about it is
// recognised as ours and ignored, not taken for a forgery.
func (t *Tagger) TestTag(issue int64) string {
	if t == nil || issue <= 0 {
		return ""
	}
	return t.sign(strconv.FormatInt(issue, 36), testCode)
}

// InviteTag is the tag of the console's invite whose token hash is hash
// (hex): "<its first 12 digits>-a-<MAC>". An invite, like a test send,
// goes to no subscriber: a report about it reads back as KindTest, ours
// and about nobody's subscription.
func (t *Tagger) InviteTag(hash string) string {
	id := strings.ToLower(hash[:min(12, len(hash))])
	if t == nil || id == "" || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	return t.sign(id, inviteCode)
}

// Traced is what a tag says of the mail it was in.
type Traced struct {
	Subscriber int64
	Kind       string
	// Issue is the issue the mail was (IssueTag); 0 for other mail and
	// for issue mail tagged before tags named the issue.
	Issue int64
}

// Parse reads a tag; ok is false for anything this Tagger did not make.
func (t *Tagger) Parse(tag string) (id int64, kind string, ok bool) {
	tr, ok := t.Trace(tag)
	return tr.Subscriber, tr.Kind, ok
}

// Trace reads a tag, the issue it names included; ok is false for
// anything this Tagger did not make.
func (t *Tagger) Trace(tag string) (Traced, bool) {
	parts := strings.Split(strings.ToLower(tag), "-")
	if t == nil || len(parts) != 3 {
		return Traced{}, false
	}
	var tr Traced
	for k, code := range kindCodes {
		if code == parts[1] {
			tr.Kind = k
		}
	}
	if parts[1] == stepCode {
		tr.Kind = KindStep
	}
	if parts[1] == inviteCode {
		if parts[0] == "" || !hmac.Equal([]byte(parts[2]), []byte(t.mac(parts[0], parts[1]))) {
			return Traced{}, false
		}
		return Traced{Kind: KindTest}, true
	}
	if parts[1] == testCode {
		n, err := strconv.ParseInt(parts[0], 36, 64)
		if err != nil || n <= 0 || !hmac.Equal([]byte(parts[2]), []byte(t.mac(parts[0], parts[1]))) {
			return Traced{}, false
		}
		return Traced{Kind: KindTest, Issue: n}, true
	}
	if issue := kindCodes["issue"]; tr.Kind == "" && len(parts[1]) > len(issue) && strings.HasPrefix(parts[1], issue) {
		n, err := strconv.ParseInt(parts[1][len(issue):], 36, 64)
		if err != nil || n <= 0 {
			return Traced{}, false
		}
		tr.Kind, tr.Issue = "issue", n
	}
	id, err := strconv.ParseInt(parts[0], 36, 64)
	if tr.Kind == "" || err != nil || id <= 0 || !hmac.Equal([]byte(parts[2]), []byte(t.mac(parts[0], parts[1]))) {
		return Traced{}, false
	}
	tr.Subscriber = id
	return tr, true
}

// TagOfAddress is the tag of a VERP address ("" when it has none).
func TagOfAddress(addr string) string { return tagBefore(addr, '+') }

// TagOfMessageID is the tag in one of our Message-IDs,
// "<random>.<tag>@domain" ("" when it has none).
func TagOfMessageID(id string) string { return tagBefore(id, '.') }

// tagBefore is what stands between the first sep and the last @ of an
// address-like value, with its angle brackets trimmed ("" without both).
func tagBefore(v string, sep byte) string {
	v = strings.Trim(strings.TrimSpace(v), "<>")
	at := strings.LastIndexByte(v, '@')
	i := strings.IndexByte(v, sep)
	if at < 0 || i < 0 || i > at {
		return ""
	}
	return v[i+1 : at]
}
