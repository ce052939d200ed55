// Package segment is the language of segments: an expression over a
// person's topics, tags, status, custom fields and join date, such as
//
//	topic:updates AND tag:beta AND NOT tag:paid AND joined > 2026-01-01
//
// Parse reads one into a tree (errors name the position, counted in
// characters from 1); Check holds it against what the list knows (the
// topics, tags and fields); the store evaluates it (store.Redis.SegmentCount).
//
// The grammar, AND binding tighter than OR, NOT tighter than both:
//
//	expr    = and { "OR" and }
//	and     = unary { "AND" unary }
//	unary   = "NOT" unary | "(" expr ")" | term
//	term    = "topic:" ID | "tag:" NAME | "status:" STATUS
//	        | "field." NAME op value | "joined" op DATE
//	op      = "=" | "!=" | "<" | ">" | "<=" | ">="
//	value   = a word or a "double-quoted string" (\" and \\ inside)
//
// The keywords are case-insensitive; everything else is as written.
package segment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxLength bounds an expression: it is read on every count and every
// page of a send.
const MaxLength = 2000

// maxDepth bounds the nesting, so a hostile expression cannot exhaust
// the stack.
const maxDepth = 50

// MaxTerms bounds the terms of an expression: each is a bitmap read per
// shard and a pass over it on every count (a viewer's count follows the
// typing), so their number is the count's cost. Well past what a
// person writes by hand.
const MaxTerms = 50

// Node is a part of an expression: *And, *Or, *Not or *Term.
type Node interface{ node() }

// And holds when both sides hold; Or when either does; Not when X does not.
type (
	And  struct{ L, R Node }
	Or   struct{ L, R Node }
	Not  struct{ X Node }
	Term struct {
		Kind  Kind
		Name  string // the topic, tag, status or field; "" for joined
		Op    string // fields and joined: one of Ops
		Value string // fields and joined
		Pos   int    // where the term starts (1-based), for Check's errors
	}
)

func (*And) node()  {}
func (*Or) node()   {}
func (*Not) node()  {}
func (*Term) node() {}

// Kind is what a term asks about.
type Kind string

// The kinds of term.
const (
	Topic  Kind = "topic"
	Tag    Kind = "tag"
	Status Kind = "status"
	Field  Kind = "field"
	Joined Kind = "joined"
)

// Ops are the comparisons.
var Ops = []string{"=", "!=", "<", ">", "<=", ">="}

// Error is an expression that does not parse or check: Pos is where
// (1-based, in characters), 0 for the whole.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string {
	if e.Pos == 0 {
		return "segment: " + e.Msg
	}
	return fmt.Sprintf("segment: at position %d: %s", e.Pos, e.Msg)
}

// Expr is a parsed expression.
type Expr struct {
	Root Node
	Src  string
}

// Terms lists the expression's terms, left to right.
func (e Expr) Terms() []*Term {
	var out []*Term
	var walk func(Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case *And:
			walk(n.L)
			walk(n.R)
		case *Or:
			walk(n.L)
			walk(n.R)
		case *Not:
			walk(n.X)
		case *Term:
			out = append(out, n)
		}
	}
	walk(e.Root)
	return out
}

// token is a lexeme: a word, a quoted string, a parenthesis or an op.
type token struct {
	kind   byte // 'w' word, 's' string, '(' ')', 'o' op, 0 end
	text   string
	pos    int // 1-based, in characters
	quoted bool
}

// lex splits src into tokens.
func lex(src string) ([]token, error) {
	var out []token
	rs := []rune(src)
	for i := 0; i < len(rs); {
		c := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(' || c == ')':
			out = append(out, token{kind: byte(c), text: string(c), pos: pos})
			i++
		case c == '=' || c == '<' || c == '>' || c == '!':
			op := string(c)
			if i+1 < len(rs) && rs[i+1] == '=' && c != '=' {
				op += "="
			}
			if op == "!" {
				return nil, &Error{pos, `"!" alone: the comparison is "!="`}
			}
			out = append(out, token{kind: 'o', text: op, pos: pos})
			i += len([]rune(op))
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) {
					j++
				}
				b.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, &Error{pos, "a quoted value that never ends (a closing \" is missing)"}
			}
			out = append(out, token{kind: 's', text: b.String(), pos: pos, quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(rs) && !unicode.IsSpace(rs[j]) && !strings.ContainsRune(`()=<>!"`, rs[j]) {
				j++
			}
			out = append(out, token{kind: 'w', text: string(rs[i:j]), pos: pos})
			i = j
		}
	}
	out = append(out, token{kind: 0, pos: len(rs) + 1})
	return out, nil
}

type parser struct {
	toks  []token
	at    int
	depth int
	terms int // read so far (MaxTerms)
}

func (p *parser) peek() token { return p.toks[p.at] }
func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != 0 {
		p.at++
	}
	return t
}

// keyword tells whether t is the keyword kw (any case).
func keyword(t token, kw string) bool { return t.kind == 'w' && strings.EqualFold(t.text, kw) }

// Parse reads an expression.
func Parse(src string) (Expr, error) {
	if strings.TrimSpace(src) == "" {
		return Expr{}, &Error{0, "the expression is empty"}
	}
	if len(src) > MaxLength || !utf8.ValidString(src) {
		return Expr{}, &Error{0, fmt.Sprintf("at most %d bytes of UTF-8", MaxLength)}
	}
	toks, err := lex(src)
	if err != nil {
		return Expr{}, err
	}
	p := &parser{toks: toks}
	root, err := p.or()
	if err != nil {
		return Expr{}, err
	}
	if t := p.peek(); t.kind != 0 {
		if t.kind == ')' {
			return Expr{}, &Error{t.pos, `")" without its "("`}
		}
		return Expr{}, &Error{t.pos, fmt.Sprintf("%q: AND or OR expected between terms", t.text)}
	}
	return Expr{Root: root, Src: src}, nil
}

func (p *parser) or() (Node, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for keyword(p.peek(), "OR") {
		p.next()
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &Or{l, r}
	}
	return l, nil
}

func (p *parser) and() (Node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for keyword(p.peek(), "AND") {
		p.next()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = &And{l, r}
	}
	return l, nil
}

func (p *parser) unary() (Node, error) {
	p.depth++
	defer func() { p.depth-- }()
	t := p.peek()
	if p.depth > maxDepth {
		return nil, &Error{t.pos, fmt.Sprintf("nested more than %d deep", maxDepth)}
	}
	switch {
	case keyword(t, "NOT"):
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Not{x}, nil
	case t.kind == '(':
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != ')' {
			return nil, &Error{c.pos, fmt.Sprintf(`")" expected to close the "(" at position %d`, t.pos)}
		}
		return x, nil
	case t.kind == 0:
		return nil, &Error{t.pos, "a term is missing at the end (topic:ID, tag:NAME, status:NAME, field.NAME = value, joined > DATE)"}
	case t.kind != 'w' || keyword(t, "AND") || keyword(t, "OR"):
		return nil, &Error{t.pos, fmt.Sprintf("%q: a term expected (topic:ID, tag:NAME, status:NAME, field.NAME = value, joined > DATE)", t.text)}
	}
	return p.term()
}

func (p *parser) term() (Node, error) {
	t := p.next()
	if p.terms++; p.terms > MaxTerms {
		return nil, &Error{t.pos, fmt.Sprintf("more than %d terms: an expression that long is costly to count (save parts as tags instead)", MaxTerms)}
	}
	w := t.text
	for _, k := range []Kind{Topic, Tag, Status} {
		if name, ok := strings.CutPrefix(w, string(k)+":"); ok {
			if name == "" {
				return nil, &Error{t.pos, fmt.Sprintf("%s: a name is missing after the colon", k)}
			}
			return &Term{Kind: k, Name: name, Pos: t.pos}, nil
		}
	}
	term := &Term{Pos: t.pos}
	switch {
	case strings.HasPrefix(w, "field."):
		term.Kind, term.Name = Field, strings.TrimPrefix(w, "field.")
		if term.Name == "" {
			return nil, &Error{t.pos, "field.: a field name is missing after the dot"}
		}
	case strings.EqualFold(w, "joined"):
		term.Kind = Joined
	default:
		return nil, &Error{t.pos, fmt.Sprintf("%q is no term: topic:ID, tag:NAME, status:NAME, field.NAME = value or joined > DATE", w)}
	}
	op := p.next()
	if op.kind != 'o' {
		return nil, &Error{op.pos, fmt.Sprintf("a comparison (%s) expected after %s", strings.Join(Ops, " "), w)}
	}
	v := p.next()
	if v.kind != 'w' && v.kind != 's' {
		return nil, &Error{v.pos, fmt.Sprintf("a value expected after %s %s", w, op.text)}
	}
	term.Op, term.Value = op.text, v.text
	return term, nil
}

// Schema is what an expression may name: the list's topics, tags and
// fields (with their types), and the statuses.
type Schema struct {
	Topics   []string
	Tags     []string
	Statuses []string
	// Fields are the declared fields' types ("text", "number", "date",
	// "choice") and a choice field's choices.
	Fields map[string]FieldType
}

// FieldType is a declared field as Check needs it.
type FieldType struct {
	Type    string
	Choices []string
}

// Check holds e against s: every name known, every comparison one its
// field's type allows (text and choice: = and != only), every value one
// of its type.
func (e Expr) Check(s Schema) error {
	for _, t := range e.Terms() {
		if err := checkTerm(t, s); err != nil {
			return err
		}
	}
	return nil
}

func checkTerm(t *Term, s Schema) error {
	bad := func(format string, a ...any) error { return &Error{t.Pos, fmt.Sprintf(format, a...)} }
	switch t.Kind {
	case Topic:
		if !slices.Contains(s.Topics, t.Name) {
			return bad("no topic %q (the topics are %s)", t.Name, strings.Join(s.Topics, ", "))
		}
	case Tag:
		if !slices.Contains(s.Tags, t.Name) {
			return bad("no tag %q has been given to anyone", t.Name)
		}
	case Status:
		if !slices.Contains(s.Statuses, t.Name) {
			return bad("no status %q (the statuses are %s)", t.Name, strings.Join(s.Statuses, ", "))
		}
	case Joined:
		if _, err := time.Parse(time.DateOnly, t.Value); err != nil {
			return bad("joined %s %q: a date YYYY-MM-DD expected", t.Op, t.Value)
		}
	case Field:
		f, ok := s.Fields[t.Name]
		if !ok {
			return bad("no field %q is declared", t.Name)
		}
		switch f.Type {
		case "number":
			if n, err := strconv.ParseFloat(t.Value, 64); err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
				return bad("field.%s is a number: %q is not one", t.Name, t.Value)
			}
		case "date":
			if _, err := time.Parse(time.DateOnly, t.Value); err != nil {
				return bad("field.%s is a date: %q is not YYYY-MM-DD", t.Name, t.Value)
			}
		case "choice":
			if !slices.Contains(f.Choices, t.Value) {
				return bad("field.%s: %q is not one of its choices (%s)", t.Name, t.Value, strings.Join(f.Choices, ", "))
			}
			fallthrough
		default:
			if t.Op != "=" && t.Op != "!=" {
				return bad("field.%s is a %s field: only = and != compare it", t.Name, f.Type)
			}
		}
	}
	return nil
}

// Compare tells whether a person's value of a field of type typ (""
// when they have none) satisfies op value. A person without a value
// satisfies != alone. Numbers compare as numbers, dates as dates
// (YYYY-MM-DD, which compare as strings), text and choices by = and !=.
func Compare(typ, have, op, value string) bool {
	if have == "" {
		return op == "!="
	}
	var c int
	switch typ {
	case "number":
		a, err1 := strconv.ParseFloat(have, 64)
		b, err2 := strconv.ParseFloat(value, 64)
		if err1 != nil || err2 != nil {
			return op == "!="
		}
		c = cmpFloat(a, b)
	default:
		c = strings.Compare(have, value)
	}
	return holds(c, op)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// holds tells whether a comparison's result c (-1, 0, 1) satisfies op.
func holds(c int, op string) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case ">":
		return c > 0
	case "<=":
		return c <= 0
	case ">=":
		return c >= 0
	}
	return false
}

// Holds is holds for the store's evaluation of joined (a day compared
// with the term's).
func Holds(c int, op string) bool { return holds(c, op) }
