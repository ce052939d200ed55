package mailer

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	htmltemplate "html/template"
	"strings"
	"text/template/parse"
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
var personal = []string{"Email", "Name", "ConfirmURL", "UnsubscribeURL", "PreferencesURL"}

const nPersonal = 5

func personalValues(d Data) [nPersonal]string {
	return [nPersonal]string{d.Email, d.Name, d.ConfirmURL, d.UnsubscribeURL, d.PreferencesURL}
}

// withPersonal is d with the per-recipient fields of v.
func withPersonal(d Data, v [nPersonal]string) Data {
	d.Email, d.Name, d.ConfirmURL, d.UnsubscribeURL, d.PreferencesURL = v[0], v[1], v[2], v[3], v[4]
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
// the whole of a printing or if pipe ({{.Name}}, {{if .Name}}).
func walkPipe(p *parse.PipeNode, ok *bool, simple bool) {
	if p == nil {
		return
	}
	whole := simple && len(p.Decl) == 0 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1
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

// plain reports whether v is left as it is by every escaper of html/template
// in text, attribute and URL contexts: letters and digits, and the few
// punctuation marks addresses and our links are made of.
func plain(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == '_', c == '@', c == ':', c == '/', c == '?', c == '=', c == ' ':
		default:
			return false
		}
	}
	return true
}

// piece is a stretch of a prepared text: fixed, or a per-recipient field.
type piece struct {
	text  string
	field int // index into personal, or -1
}

type filler []piece

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

// variant is one shape of a prepared mail.
type variant struct {
	subject, text, html filler
	checked, off        bool
}

// Prepared renders one kind of mail with shared data (a digest's period and
// items) for many recipients. It is not safe for concurrent use: a batch
// has its own.
type Prepared struct {
	r        *Renderer
	kind     string
	shared   Data
	marks    [nPersonal]string
	variants map[[nPersonal]bool]*variant
	// Fast and Full count the mails filled in and rendered whole (tests
	// and profiles read them).
	Fast, Full int
}

// Prepare starts a Prepared for kind with the fields all recipients share;
// its per-recipient fields are ignored.
func (r *Renderer) Prepare(kind string, shared Data) (*Prepared, error) {
	if _, ok := r.text[kind]; !ok {
		return nil, fmt.Errorf("render: unknown mail kind %q", kind)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	tag := hex.EncodeToString(nonce[:])
	p := &Prepared{r: r, kind: kind, shared: shared, variants: map[[nPersonal]bool]*variant{}}
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
func (p *Prepared) Render(d Data) (*Message, error) {
	values := personalValues(d)
	full := withPersonal(p.shared, values)
	fast := p.r.preparable[p.kind]
	for _, v := range values {
		fast = fast && plain(v)
	}
	if !fast {
		p.Full++
		return p.r.Render(p.kind, full)
	}
	var shape [nPersonal]bool
	for i, v := range values {
		shape[i] = v != ""
	}
	v, err := p.variant(shape)
	if err != nil {
		return nil, err
	}
	if v.off {
		p.Full++
		return p.r.Render(p.kind, full)
	}
	msg := &Message{
		Kind: p.kind, To: full.Email, Subject: v.subject.fill(values),
		Text: v.text.fill(values), HTML: v.html.fill(values), UnsubscribeURL: full.UnsubscribeURL, ListID: full.ListID,
	}
	if !v.checked {
		v.checked = true
		want, err := p.r.Render(p.kind, full)
		if err != nil {
			return nil, err
		}
		if want.Subject != msg.Subject || want.Text != msg.Text || want.HTML != msg.HTML {
			v.off = true
			p.Full++
			return want, nil
		}
	}
	p.Fast++
	return msg, nil
}

// variant renders the shape's placeholders once.
func (p *Prepared) variant(shape [nPersonal]bool) (*variant, error) {
	if v, ok := p.variants[shape]; ok {
		return v, nil
	}
	var vals [nPersonal]string
	for i, set := range shape {
		if set {
			vals[i] = p.marks[i]
		}
	}
	d := withPersonal(p.shared, vals)
	msg, err := p.r.render(p.kind, d)
	if err != nil {
		return nil, err
	}
	v := &variant{subject: split(msg.Subject, p.marks), text: split(msg.Text, p.marks), html: split(msg.HTML, p.marks)}
	p.variants[shape] = v
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
