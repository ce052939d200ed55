package mailer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"text/template/parse"
	"time"
)

// Templates are written in the console and run for every mail, and
// text/template has no way to stop a template once it runs. So a
// template is held to bounds in two places:
//
//   - at save (CheckTemplates), its cost is computed from its tree
//     (templateSteps): a range counts as maxRangeItems runs of its body,
//     a template call as the callee's cost, a call cycle (recursion) as
//     refused; over maxTemplateSteps, it is refused, and its renders with
//     sample data may write at most MaxCheckBytes a part;
//   - at render, each part goes through a cappedWriter: at most
//     MaxRenderBytes, and no write after RenderTimeout from the start.
//     A template whose work is all writing stops at either; one that
//     works without writing is bounded by its cost, checked at save.
const (
	// MaxRenderBytes is the most one part of a mail (subject, text,
	// HTML, or a digest's or a post's Markdown) may be: a mail over it
	// is refused, unrendered. Far above Gmail's clip (102 KB) and an
	// issue's largest body rendered.
	MaxRenderBytes = 4 << 20
	// MaxCheckBytes is the most a part may be when a template is checked
	// with sample data (one item, a short body): more is a template that
	// repeats itself.
	MaxCheckBytes = 512 << 10
	// RenderTimeout bounds one part's render.
	RenderTimeout = 5 * time.Second
	// maxRangeItems is the most items a range is taken to go over: a
	// feed keeps at most 500 entries (store.FeedMaxEntries), a person
	// 50 tags and 100 fields.
	maxRangeItems = 500
	// maxTemplateSteps bounds a template's cost: two ranges nested over
	// maxRangeItems items each, with a small body, fit; three do not.
	maxTemplateSteps = 1_000_000
)

// ErrRenderLimit is a render stopped at one of its bounds.
var ErrRenderLimit = errors.New("render limit")

// cappedWriter fails a write past its byte allowance or its deadline,
// which stops the template's execution there.
type cappedWriter struct {
	buf      bytes.Buffer
	left     int
	deadline time.Time
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		return 0, fmt.Errorf("%w: the output is over %d bytes", ErrRenderLimit, c.left+c.buf.Len())
	}
	if time.Now().After(c.deadline) {
		return 0, fmt.Errorf("%w: the render took over %s", ErrRenderLimit, RenderTimeout)
	}
	c.left -= len(p)
	return c.buf.Write(p)
}

// executor is a text/template or an html/template.
type executor interface {
	ExecuteTemplate(w io.Writer, name string, data any) error
}

// execCapped runs template name of t on data into at most limit bytes,
// within RenderTimeout.
func execCapped(t executor, name string, data any, limit int) (string, error) {
	w := &cappedWriter{left: limit, deadline: time.Now().Add(RenderTimeout)}
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// templateSteps is the most nodes a run of tree executes, counting each
// range as maxRangeItems runs of its body and each template call as the
// callee's steps (lookup finds a callee's tree, nil when none). A call
// cycle is an error, and so is a cost over maxTemplateSteps.
func templateSteps(tree *parse.Tree, lookup func(name string) *parse.Tree) (int, error) {
	c := &stepCounter{lookup: lookup, done: map[string]int{}, active: map[string]bool{}}
	n := c.tree(tree)
	return n, c.err
}

type stepCounter struct {
	lookup func(string) *parse.Tree
	done   map[string]int
	active map[string]bool
	err    error
}

func (c *stepCounter) tree(t *parse.Tree) int {
	if t == nil || c.err != nil {
		return 0
	}
	if n, ok := c.done[t.Name]; ok {
		return n
	}
	if c.active[t.Name] {
		c.err = fmt.Errorf("template %q calls itself: a template may not recurse", t.Name)
		return 0
	}
	c.active[t.Name] = true
	n := c.node(t.Root)
	c.active[t.Name] = false
	c.done[t.Name] = n
	return n
}

func (c *stepCounter) node(n parse.Node) int {
	if c.err != nil {
		return 0
	}
	steps := 1
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, x := range n.Nodes {
				steps = add(steps, c.node(x))
			}
		}
	case *parse.IfNode:
		steps = add(steps, add(c.node(n.List), c.node(n.ElseList)))
	case *parse.WithNode:
		steps = add(steps, add(c.node(n.List), c.node(n.ElseList)))
	case *parse.RangeNode:
		if !overData(n.Pipe) {
			c.err = fmt.Errorf("{{range %s}}: a range must go over the mail's data (.Entries, .Subscriber.Tags, .Subscriber.Fields), whose size is bounded, not over a number or a computed value", n.Pipe)
			return 0
		}
		steps = add(steps, add(mul(maxRangeItems, c.node(n.List)), c.node(n.ElseList)))
	case *parse.TemplateNode:
		steps = add(steps, c.tree(c.lookup(n.Name)))
	}
	if steps > maxTemplateSteps && c.err == nil {
		c.err = fmt.Errorf("its ranges and template calls could run over %d steps for one mail (each range counted as %d items): nest fewer ranges", maxTemplateSteps, maxRangeItems)
	}
	return steps
}

// overData reports whether a range's pipeline is a field of the mail's
// data (".Entries", "$.Subscriber.Tags"): the one thing whose size the
// service bounds. A number, a variable set to one, a function's result or
// the dot (which with can set to anything) is not.
func overData(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1 && a.Ident[0] == "$"
	}
	return false
}

// add and mul saturate above maxTemplateSteps: a cost only needs to be
// known up to the bound.
func add(a, b int) int { return min(a+b, maxTemplateSteps+1) }
func mul(a, b int) int {
	if b != 0 && a > (maxTemplateSteps+1)/b {
		return maxTemplateSteps + 1
	}
	return min(a*b, maxTemplateSteps+1)
}
