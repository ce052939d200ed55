package mailer

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"mime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/internal/mailheader"
)

// Writing a prepared mail through go-mail quoted-printable encodes both of
// its parts for every reader, though all but a few lines are the same for
// the whole batch: most of the CPU a digest mail cost. A wireTemplate holds
// a variant of a prepared mail (prepare.go) as the bytes go-mail writes for
// it, already encoded, cut where a reader's values go:
//
//   - the header fields that differ per mail (Date, Message-ID, To,
//     List-Unsubscribe, and Subject when the template prints a personal
//     field in it) are written per mail, folded as go-mail folds them;
//   - in each body part, the lines without a personal value are encoded
//     once; encoding resumes per reader from the state where the line
//     holding a value starts, up to the end of that line (qp.go).
//
// The structure (which headers, in what order, the MIME parts) is not
// written here: go-mail writes a skeleton of the variant once, with markers
// where the parts' text goes, and the template keeps its bytes. So the
// result is go-mail's, byte for byte, and the first mail of each template
// is checked against go-mail's own bytes (Composer.encode): any difference
// turns the template off and its mails take go-mail's path.

// encode appends msg's bytes, as go-mail writes them, to buf: from its
// variant's template when Prepared.Render made it (and returns the
// template), else through go-mail.
func (s *Composer) encode(msg *Message, buf []byte) ([]byte, *wireTemplate, error) {
	pm := msg.prep
	if pm == nil {
		b, err := s.writeGoMail(msg, buf)
		return b, nil, err
	}
	if !pm.unchanged(msg) {
		pm.complete(msg)
		b, err := s.writeGoMail(msg, buf)
		return b, nil, err
	}
	t := s.wireTemplate(pm, msg)
	msg.boundary = t.boundary
	if t.off.Load() {
		pm.complete(msg)
		b, err := s.writeGoMail(msg, buf)
		return b, nil, err
	}
	out, err := t.assemble(s, buf, msg, &pm.values)
	if err != nil {
		return nil, nil, err
	}
	var want []byte
	t.check.Do(func() {
		// The first mail of the template is also written whole by go-mail:
		// the template is used only where the two agree byte for byte.
		var err error
		full := *msg
		pm.complete(&full)
		want, err = s.writeGoMail(&full, nil)
		if err != nil || !bytes.Equal(out, want) {
			t.off.Store(true)
			s.log.Warn("prepared mail: the encoded template differs from go-mail's, mails of this variant take the full path", "kind", msg.Kind)
		}
	})
	if t.off.Load() {
		if want == nil {
			pm.complete(msg)
			b, err := s.writeGoMail(msg, out[:0])
			return b, nil, err
		}
		return append(out[:0], want...), nil, nil
	}
	pm.p.encoded.Add(1)
	return out, t, nil
}

// wireTemplate returns the template of pm's variant for s, made on first
// use.
func (s *Composer) wireTemplate(pm *preparedMail, msg *Message) *wireTemplate {
	v := pm.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if t := v.wire[s]; t != nil {
		return t
	}
	t, err := s.newWireTemplate(pm.p, v, msg)
	if err != nil {
		s.log.Warn("prepared mail: no template, mails of this variant take the full path", "kind", msg.Kind, "err", err)
		t = &wireTemplate{}
		t.off.Store(true)
	}
	if v.wire == nil {
		v.wire = map[*Composer]*wireTemplate{}
	}
	v.wire[s] = t
	return t
}

// wireTemplate is one variant of a prepared mail, for one sender.
type wireTemplate struct {
	ops      []wireOp
	boundary string
	// html: the variant has an HTML part (its filled-in HTML is never
	// empty then, as a field it holds is a value that is not).
	html bool
	// check compares the template's first mail with go-mail's bytes; off
	// records that they differ (or that no template could be made), and
	// the mails then take go-mail's path.
	check sync.Once
	off   atomic.Bool

	// bodyPrefix is the beginning of the body, the same in every mail of
	// the template (up to the first line with a reader's value); with
	// DKIM, the body hash's state after it is computed once (prefix) and
	// each mail's hash goes on from a copy of it.
	bodyPrefix []byte
	prefixOnce sync.Once
	prefix     hash.Cloner
}

// bodyHash is signer's hash of body, a mail's body made from t.
func (t *wireTemplate) bodyHash(signer Signer, body []byte) []byte {
	t.prefixOnce.Do(func() {
		t.prefix = signer.BodyHash()
		t.prefix.Write(t.bodyPrefix) // a hash's Write never fails
	})
	if !bytes.HasPrefix(body, t.bodyPrefix) {
		return bodyHash(signer, body)
	}
	c, err := t.prefix.Clone()
	if err != nil {
		// A hash that cannot be copied is hashed whole: the same sum.
		return bodyHash(signer, body)
	}
	c.Write(body[len(t.bodyPrefix):])
	return c.Sum(nil)
}

type opKind uint8

const (
	opStatic opKind = iota // bytes as they are
	opHeader               // a header field of the mail's own
	opText                 // a stretch of the text part with a reader's values
	opHTML                 // the same in the HTML part
)

type wireOp struct {
	kind   opKind
	static []byte
	header string // opHeader: the field's name
	run    qpRun  // opText, opHTML
}

// qpRun is a stretch of a quoted-printable part that holds reader values:
// encoding starts from start (the state where the line holding the first
// value begins) and runs over items up to the end of the line holding the
// last one, or to the end of the part (close).
type qpRun struct {
	start qpState
	items []piece
	close bool
}

// perMailHeaders are the header fields written per mail.
var perMailHeaders = map[string]bool{"Date": true, "Message-ID": true, "To": true, "List-Unsubscribe": true}

// newBoundary is a multipart boundary as go-mail makes them: 30 random
// bytes in hex. One is made per template, and the mails of a batch share
// it; it is random, so no text in them holds it.
func newBoundary() string {
	var b [30]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// newWireTemplate builds the template of variant v of p for sender s:
// go-mail writes the skeleton (msg with markers for the parts' text), and
// the text and HTML parts are encoded here from the variant's pieces.
func (s *Composer) newWireTemplate(p *Prepared, v *variant, msg *Message) (*wireTemplate, error) {
	t := &wireTemplate{boundary: newBoundary(), html: len(v.html) > 0}
	textMark, htmlMark := p.marks[0]+"t", p.marks[0]+"h"
	personalSubject := v.subject.personal()
	skel := &Message{
		Kind: msg.Kind, To: "reader@example.invalid", Subject: msg.Subject, Text: textMark,
		UnsubscribeURL: msg.UnsubscribeURL, ListID: msg.ListID, From: msg.From, ReplyTo: msg.ReplyTo,
		MessageID: "id@example.invalid", Date: time.Unix(0, 0).UTC(), boundary: t.boundary,
	}
	if t.html {
		skel.HTML = htmlMark
	}
	m, err := s.build(skel)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if _, err := m.WriteTo(&raw); err != nil {
		return nil, err
	}
	b := raw.Bytes()
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, errors.New("encode: go-mail wrote no header")
	}
	// The header, field by field.
	var static []byte
	for rest := b[:end+2]; len(rest) > 0; {
		n := mailheader.FieldLen(rest)
		field := rest[:n]
		rest = rest[n:]
		name, _, _ := bytes.Cut(field, []byte(":"))
		if perMailHeaders[string(name)] || personalSubject && string(name) == "Subject" {
			t.add(wireOp{kind: opStatic, static: static})
			static = nil
			t.add(wireOp{kind: opHeader, header: string(name)})
			continue
		}
		static = append(static, field...)
	}
	// The body: the skeleton's with the parts' text in place of the marks.
	// It starts after the empty line, two bytes into what follows here.
	body := b[end+2:]
	bodyAt, prefixed := len(static)+2, false
	for _, part := range []struct {
		mark string
		f    filler
		kind opKind
	}{{textMark, v.text, opText}, {htmlMark, v.html, opHTML}} {
		if part.kind == opHTML && !t.html {
			continue
		}
		at := bytes.Index(body, []byte(part.mark))
		if at < 0 {
			return nil, fmt.Errorf("encode: no %s part in go-mail's skeleton", part.mark)
		}
		static = append(static, body[:at]...)
		body = body[at+len(part.mark):]
		for _, op := range qpOps(part.f, part.kind) {
			if op.kind == opStatic {
				static = append(static, op.static...)
				continue
			}
			if !prefixed {
				t.bodyPrefix, prefixed = bytes.Clone(static[bodyAt:]), true
			}
			t.add(wireOp{kind: opStatic, static: static})
			static = nil
			t.add(op)
		}
	}
	static = append(static, body...)
	if !prefixed {
		t.bodyPrefix = bytes.Clone(static[bodyAt:])
	}
	t.add(wireOp{kind: opStatic, static: static})
	return t, nil
}

func (t *wireTemplate) add(op wireOp) {
	if op.kind == opStatic && len(op.static) == 0 {
		return
	}
	t.ops = append(t.ops, op)
}

// qpOps encodes a part from its pieces: the stretches without reader
// values as static bytes, the others as runs.
func qpOps(f filler, kind opKind) []wireOp {
	var ops []wireOp
	var st qpState
	var static []byte
	var run *qpRun
	endRun := func() {
		ops = append(ops, wireOp{kind: opStatic, static: static}, wireOp{kind: kind, run: *run})
		static, run = nil, nil
	}
	for _, p := range f {
		if p.field >= 0 {
			if run == nil {
				run = &qpRun{start: st}
			}
			run.items = append(run.items, p)
			continue
		}
		text := p.text
		if run != nil {
			nl := strings.IndexByte(text, '\n')
			if nl < 0 {
				run.items = append(run.items, p)
				continue
			}
			// After a hard line break the encoder starts afresh: what
			// follows no longer depends on the reader's values.
			run.items = append(run.items, piece{text: text[:nl+1], field: -1})
			endRun()
			st = qpState{}
			text = text[nl+1:]
		}
		static = st.write(static, text)
	}
	if run != nil {
		run.close = true
		endRun()
		return ops
	}
	return append(ops, wireOp{kind: opStatic, static: st.close(static)})
}

// assemble appends the bytes of msg, a mail of the template's variant with
// reader values v, to dst.
func (t *wireTemplate) assemble(s *Composer, dst []byte, msg *Message, v *[nPersonal]string) ([]byte, error) {
	for i := range t.ops {
		op := &t.ops[i]
		switch op.kind {
		case opStatic:
			dst = append(dst, op.static...)
		case opHeader:
			var err error
			if dst, err = s.appendMailHeader(dst, op.header, msg); err != nil {
				return nil, err
			}
		default:
			st := op.run.start
			for _, it := range op.run.items {
				if it.field >= 0 {
					dst = st.write(dst, v[it.field])
				} else {
					dst = st.write(dst, it.text)
				}
			}
			if op.run.close {
				dst = st.close(dst)
			}
		}
	}
	return dst, nil
}

// appendMailHeader appends the field name of msg as go-mail writes it.
func (s *Composer) appendMailHeader(dst []byte, name string, msg *Message) ([]byte, error) {
	var value string
	switch name {
	case "Date":
		value = s.dateValue(msg.Date)
	case "Message-ID":
		value = "<" + msg.MessageID + ">"
	case "List-Unsubscribe":
		value = "<" + msg.UnsubscribeURL + ">"
	case "Subject":
		value = msg.Subject
	case "To":
		to, ok := simpleAddress(msg.ToName, msg.To)
		if !ok {
			// As build: the same address, the same errors.
			a, err := toAddress(msg.ToName, msg.To)
			if err != nil {
				return nil, err
			}
			to = a.String()
		}
		return appendHeaderField(dst, name, to), nil
	}
	// go-mail encodes every generic header's value (SetGenHeader).
	return appendHeaderField(dst, name, mime.QEncoding.Encode("UTF-8", value)), nil
}

// dateValue is t as go-mail writes a Date header, made once per second.
func (s *Composer) dateValue(t time.Time) string {
	_, offset := t.Zone()
	if d := s.date.Load(); d != nil && d.unix == t.Unix() && d.offset == offset {
		return d.value
	}
	d := &dateField{unix: t.Unix(), offset: offset, value: t.Format(time.RFC1123Z)}
	s.date.Store(d)
	return d.value
}

// dateField is a formatted Date value and the second it names.
type dateField struct {
	unix   int64
	offset int
	value  string
}

// simpleAddress is what net/mail writes for toAddress(name, addr), made
// without parsing for the common case: a name of printable ASCII without
// quotes, backslashes or encoded words, and an address of two dot-atoms.
// ok is false for anything else, which is parsed (encode_test.go checks
// the two agree).
func simpleAddress(name, addr string) (string, bool) {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || !dotAtom(addr[:at]) || !dotAtom(addr[at+1:]) {
		return "", false
	}
	if name == "" {
		return "<" + addr + ">", true
	}
	if strings.Contains(name, "=?") {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return "", false
		}
	}
	return `"` + name + `" <` + addr + ">", true
}

// dotAtom reports whether s is an RFC 5322 dot-atom of ASCII characters.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.':
		case strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// appendHeaderField appends "name: value" folded as go-mail's
// msgWriter.writeHeader folds one value: at spaces, before a word that
// would reach column 76, without the space before the break.
func appendHeaderField(dst []byte, name, value string) []byte {
	room := maxHeaderLine - 2 - len(name) - 2
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	for {
		word, rest, more := strings.Cut(value, " ")
		if room-len(word) <= 1 {
			if n := len(dst); dst[n-1] == ' ' {
				dst = dst[:n-1]
			}
			dst = append(dst, "\r\n "...)
			room = maxHeaderLine - 3
		}
		dst = append(dst, word...)
		room -= len(word)
		if !more {
			break
		}
		dst = append(dst, ' ')
		room--
		value = rest
	}
	return append(dst, "\r\n"...)
}

// maxHeaderLine is go-mail's MaxHeaderLength.
const maxHeaderLine = 76
