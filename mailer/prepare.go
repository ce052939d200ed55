package mailer

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	htmltemplate "html/template"
	"strings"
	"sync"
	"sync/atomic"
	"text/template/parse"
	"unicode"
	"unicode/utf8"
)

// Rendering a digest's twenty items through html/template for every one of
// a million recipients is most of the CPU a mail costs, and all but a few
// words of it are the same for every recipient of the batch. A Prepared
// mail is rendered once, with placeholders where the per-recipient fields
// go (Email, Name, ConfirmURL, UnsubscribeURL, PreferencesURL), and is then filled in per
// recipient by concatenation.
//
// Filling in is only done where it gives exactly what a full render would:
//
//   - the kind's templates use the per-recipient fields only to print them
//     ({{.Name}}) or to test them for emptiness ({{if .Name}}): checked on
//     the parse trees when the templates are loaded (preparable);
//   - one variant is prepared per shape (which of the fields are empty),
//     so every {{if}} takes the recipient's own branch;
//   - a recipient's values are made of characters that no escaper of
//     html/template changes in the contexts our mails put them in (plain);
//   - the first recipient of each variant is rendered both ways and the two
//     compared: a template that puts a field where it is escaped after all
//     (a script, a query) turns the variant off.
//
// Everything else takes the full render, so an operator's template can do
// anything a template can; it just costs more.

// personal are the per-recipient fields of Data, in a fixed order.
var personal = []string{"Email", "Name", "ConfirmURL", "UnsubscribeURL", "PreferencesURL", "Reader"}

const nPersonal = 6

func personalValues(d Data) [nPersonal]string {
	return [nPersonal]string{d.Email, d.Name, d.ConfirmURL, d.UnsubscribeURL, d.PreferencesURL, d.Reader}
}

// withPersonal is d with the per-recipient fields of v.
func withPersonal(d Data, v [nPersonal]string) Data {
	d.Email, d.Name, d.ConfirmURL, d.UnsubscribeURL, d.PreferencesURL, d.Reader = v[0], v[1], v[2], v[3], v[4], v[5]
	return d
}

// preparable reports whether every use of a per-recipient field in tree is
// printing it or testing it in an if.
func preparable(trees ...*parse.Tree) bool {
	ok := true
	var walk func(n parse.Node, printing bool)
	walk = func(n parse.Node, printing bool) {
		if n == nil || !ok {
			return
		}
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c, false)
			}
		case *parse.ActionNode:
			walkPipe(n.Pipe, &ok, true)
		case *parse.IfNode:
			walkPipe(n.Pipe, &ok, true)
			walk(n.List, false)
			walk(n.ElseList, false)
		case *parse.RangeNode:
			walkPipe(n.Pipe, &ok, false)
			walk(n.List, false)
			walk(n.ElseList, false)
		case *parse.WithNode:
			walkPipe(n.Pipe, &ok, false)
			walk(n.List, false)
			walk(n.ElseList, false)
		case *parse.TemplateNode:
			walkPipe(n.Pipe, &ok, false)
		}
	}
	for _, t := range trees {
		if t != nil {
			walk(t.Root, false)
		}
	}
	return ok
}

// walkPipe clears ok when the pipe uses a per-recipient field other than as
// the whole of a printing or if pipe ({{.Name}}, {{if .Name}}), or with a
// fixed fallback (fallbackPipe).
func walkPipe(p *parse.PipeNode, ok *bool, simple bool) {
	if p == nil {
		return
	}
	whole := simple && len(p.Decl) == 0 && (len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 || fallbackPipe(p))
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if usesPersonal(a) && !whole {
				*ok = false
			}
			if pn, isPipe := a.(*parse.PipeNode); isPipe {
				walkPipe(pn, ok, false)
			}
		}
	}
}

// fallbackPipe reports whether p is a per-recipient field or a fixed
// text when it is empty: {{.Name | default "there"}}, {{default "there"
// .Name}}, {{or .Name "there"}}. A variant has each field empty or not,
// so in every one such a pipe gives the field's mark or the text, as a
// full render gives the reader's value or the text.
func fallbackPipe(p *parse.PipeNode) bool {
	isFunc := func(n parse.Node, name string) bool {
		id, ok := n.(*parse.IdentifierNode)
		return ok && id.Ident == name
	}
	isText := func(n parse.Node) bool {
		_, ok := n.(*parse.StringNode)
		return ok
	}
	switch c := p.Cmds; {
	case len(c) == 2 && len(c[0].Args) == 1 && len(c[1].Args) == 2:
		return usesPersonal(c[0].Args[0]) && isFunc(c[1].Args[0], "default") && isText(c[1].Args[1])
	case len(c) == 1 && len(c[0].Args) == 3:
		a := c[0].Args
		return isFunc(a[0], "default") && isText(a[1]) && usesPersonal(a[2]) ||
			isFunc(a[0], "or") && usesPersonal(a[1]) && isText(a[2])
	}
	return false
}

func usesPersonal(n parse.Node) bool {
	f, ok := n.(*parse.FieldNode)
	if !ok {
		return false
	}
	for _, p := range personal {
		if len(f.Ident) > 0 && f.Ident[0] == p {
			return true
		}
	}
	return false
}

// Classes of a reader's value, for the shape of a variant: a variant is
// checked on its first reader, and a value with letters beyond ASCII gets
// variants of its own, so that a template that puts a field where its
// escaper changes such letters (a URL, which percent-encodes them) is
// caught on the first of them.
const (
	valueEmpty    = 0
	valueASCII    = 1
	valueUnicode  = 2
	valueNotPlain = 3
)

// plainClass says whether v is left as it is by every escaper of
// html/template in text, attribute and URL contexts, and by the subject's
// whitespace folding: letters and digits (any script, with their
// combining marks), single spaces between words, and the few ASCII
// punctuation marks addresses and our links are made of. Anything else
// (valueNotPlain) takes the full render.
func plainClass(v string) uint8 {
	if v == "" {
		return valueEmpty
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' || strings.Contains(v, "  ") {
		return valueNotPlain
	}
	class := uint8(valueASCII)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == '_', c == '@', c == ':', c == '/', c == '?', c == '=', c == ' ':
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError || !(unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r)) {
				return valueNotPlain
			}
			class = valueUnicode
			i += n - 1
		default:
			return valueNotPlain
		}
	}
	return class
}

// piece is a stretch of a prepared text: fixed, or a per-recipient field.
type piece struct {
	text  string
	field int // index into personal, or -1
}

type filler []piece

// personal reports whether the text holds a reader's value.
func (f filler) personal() bool {
	for _, p := range f {
		if p.field >= 0 {
			return true
		}
	}
	return false
}

// fill joins the pieces with v's fields in place.
func (f filler) fill(v [nPersonal]string) string {
	n := 0
	for _, p := range f {
		if p.field < 0 {
			n += len(p.text)
		} else {
			n += len(v[p.field])
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range f {
		if p.field < 0 {
			b.WriteString(p.text)
		} else {
			b.WriteString(v[p.field])
		}
	}
	return b.String()
}

// split cuts s at the placeholders.
func split(s string, marks [nPersonal]string) filler {
	var out filler
	for len(s) > 0 {
		at, field := -1, -1
		for i, m := range marks {
			if j := strings.Index(s, m); j >= 0 && (at < 0 || j < at) {
				at, field = j, i
			}
		}
		if at < 0 {
			out = append(out, piece{text: s, field: -1})
			break
		}
		if at > 0 {
			out = append(out, piece{text: s[:at], field: -1})
		}
		out = append(out, piece{field: field})
		s = s[at+len(marks[field]):]
	}
	return out
}

// shape is which class (valueEmpty, ASCII, Unicode) each reader value is.
type shape [nPersonal]uint8

// variant is one shape of a prepared mail.
type variant struct {
	subject, text, html filler
	// check compares the variant's first mail with the full render; off
	// records that they differ, and the variant's mails are then rendered
	// whole.
	check sync.Once
	off   atomic.Bool

	mu sync.Mutex
	// wire holds the variant's encoded templates, per composer (encode.go).
	wire map[*Composer]*wireTemplate
}

// preparedMail ties a filled-in Message to its variant, so that a sender
// can encode it from the variant's pieces (encode.go) instead of from its
// text.
type preparedMail struct {
	v      *variant
	p      *Prepared
	values [nPersonal]string
	// What Render filled in: a caller that changes the message afterwards
	// sends it through the full path.
	subject, text, html, unsubscribe, listID, from, replyTo string
	// lazy: the text and HTML were left out (RenderFor), to be filled in
	// only if the mail takes go-mail's path after all.
	lazy bool
}

// complete fills in the text and HTML a lazy message was made without.
func (pm *preparedMail) complete(msg *Message) {
	if !pm.lazy {
		return
	}
	if msg.Text == "" {
		msg.Text = pm.v.text.fill(pm.values)
	}
	if msg.HTML == "" {
		msg.HTML = pm.v.html.fill(pm.values)
	}
}

// unchanged reports whether msg still carries what Render filled in.
func (pm *preparedMail) unchanged(msg *Message) bool {
	return msg.Subject == pm.subject && msg.Text == pm.text && msg.HTML == pm.html &&
		msg.UnsubscribeURL == pm.unsubscribe && msg.ListID == pm.listID && msg.From == pm.from && msg.ReplyTo == pm.replyTo
}

// Prepared renders one kind of mail with shared data (a digest's period and
// items) for many recipients. It is safe for concurrent use: the batches
// of a digest share one, so each variant is rendered, checked and encoded
// once per worker rather than once per batch.
type Prepared struct {
	r      *templates
	kind   string
	shared Data
	marks  [nPersonal]string

	mu       sync.Mutex
	variants map[shape]*variant

	fast, full, encoded atomic.Int64
}

// Counts are how many mails were filled in (fast) and rendered whole
// (full), and how many a sender wrote from an encoded template (tests and
// profiles read them).
func (p *Prepared) Counts() (fast, full, encoded int) {
	return int(p.fast.Load()), int(p.full.Load()), int(p.encoded.Load())
}

// Prepare starts a Prepared for kind with the fields all recipients share;
// its per-recipient fields are ignored.
func (r *templates) Prepare(kind string, shared Data) (*Prepared, error) {
	if _, ok := r.text[kind]; !ok {
		return nil, fmt.Errorf("render: unknown mail kind %q", kind)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	tag := hex.EncodeToString(nonce[:])
	p := &Prepared{r: r, kind: kind, shared: shared, variants: map[shape]*variant{}}
	for i := range personal {
		// Letters and digits only, so every escaper leaves them as they
		// are; the URL ones are URLs, so the URL filters keep them.
		p.marks[i] = fmt.Sprintf("nlph%s%d", tag, i)
	}
	p.marks[2] = "https://" + p.marks[2] + ".invalid/c"
	p.marks[3] = "https://" + p.marks[3] + ".invalid/u"
	p.marks[4] = "https://" + p.marks[4] + ".invalid/p"
	return p, nil
}

// Render is Renderer.Render for one recipient: d carries the recipient's
// fields, the shared ones come from Prepare.
func (p *Prepared) Render(d Data) (*Message, error) { return p.render(d, false) }

// PreparedEncoder is a Mailer that writes a prepared mail from its
// variant's encoded template (encode.go), not from its Text and HTML:
// one that composes with a Composer (the worker's mailer and its
// sessions) says so with this method.
type PreparedEncoder interface{ EncodesPrepared() }

// RenderFor is Render for a mail that m sends. A mailer that writes
// prepared mails from their encoded templates (a PreparedEncoder) gets
// the message without its Text and HTML filled in, which it would not
// read: two copies of the mail's text fewer per mail. Such a message
// fills them in itself if it must take the full path after all.
func (p *Prepared) RenderFor(m Mailer, d Data) (*Message, error) {
	_, lazy := m.(PreparedEncoder)
	return p.render(d, lazy)
}

func (p *Prepared) render(d Data, lazy bool) (*Message, error) {
	values := personalValues(d)
	full := withPersonal(p.shared, values)
	fast := p.r.preparable[p.kind]
	var sh shape
	for i, v := range values {
		sh[i] = plainClass(v)
		fast = fast && sh[i] != valueNotPlain
	}
	if !fast {
		p.full.Add(1)
		return p.r.render(p.kind, full)
	}
	v, err := p.variant(sh)
	if err != nil {
		return nil, err
	}
	if v.off.Load() {
		p.full.Add(1)
		return p.r.render(p.kind, full)
	}
	msg := &Message{
		Kind: p.kind, To: full.Email, Subject: v.subject.fill(values), UnsubscribeURL: full.UnsubscribeURL, ListID: full.ListID,
		From: full.Newsletter.From, ReplyTo: cmp.Or(full.ReplyTo, full.Newsletter.ReplyTo),
	}
	pm := &preparedMail{v: v, p: p, values: values, lazy: true}
	var want *Message
	v.check.Do(func() {
		pm.complete(msg)
		// The first mail of the variant is also rendered whole; if the
		// two differ (or the render fails), the variant is off.
		var err error
		want, err = p.r.render(p.kind, full)
		if err != nil || want.Subject != msg.Subject || want.Text != msg.Text || want.HTML != msg.HTML {
			v.off.Store(true)
		}
	})
	if v.off.Load() {
		p.full.Add(1)
		if want != nil {
			return want, nil
		}
		return p.r.render(p.kind, full)
	}
	if !lazy {
		pm.complete(msg)
	}
	pm.lazy = lazy
	p.fast.Add(1)
	pm.subject, pm.text, pm.html, pm.unsubscribe, pm.listID = msg.Subject, msg.Text, msg.HTML, msg.UnsubscribeURL, msg.ListID
	pm.from, pm.replyTo = msg.From, msg.ReplyTo
	msg.prep = pm
	return msg, nil
}

// variant renders the shape's placeholders once.
func (p *Prepared) variant(sh shape) (*variant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.variants[sh]; ok {
		return v, nil
	}
	var vals [nPersonal]string
	for i, class := range sh {
		if class != valueEmpty {
			vals[i] = p.marks[i]
		}
	}
	d := withPersonal(p.shared, vals)
	msg, err := p.r.render(p.kind, d)
	if err != nil {
		return nil, err
	}
	v := &variant{subject: split(msg.Subject, p.marks), text: split(msg.Text, p.marks), html: split(msg.HTML, p.marks)}
	p.variants[sh] = v
	return v, nil
}

// htmlTrees lists the parse trees of an html template set, before escaping.
func htmlTrees(t *htmltemplate.Template) []*parse.Tree {
	var out []*parse.Tree
	for _, x := range t.Templates() {
		out = append(out, x.Tree)
	}
	return out
}
