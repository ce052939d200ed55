package mailer

import (
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// What a mail client makes of an issue's HTML is not what a browser makes
// of it: Gmail drops <input> and every <style> rule it cannot scope,
// Outlook ignores max-width. So the Markdown's elements that can overflow
// a phone's screen carry their sizing inline, and a task list's boxes are
// characters.

// Inline styles of the elements that can be wider than the screen:
// images shrink to the card; tables take its width and split it evenly
// (table-layout:fixed), breaking long words in their cells, in a slightly
// smaller type, so a table of four or five columns fits 320 px.
const (
	imageStyle = "max-width:100%;height:auto;border:0"
	tableStyle = "width:100%;max-width:100%;table-layout:fixed;border-collapse:collapse;font-size:14px;line-height:1.35"
	cellStyle  = "padding:4px 6px;border:1px solid #ddd;vertical-align:top;word-break:break-word;overflow-wrap:anywhere"
)

// Task list items: a ballot box, checked or not, in place of a form
// field no mail client shows.
const (
	taskDone = "☑ "
	taskOpen = "☐ "
)

// mailSizing puts the inline sizing on images, tables and their cells
// (goldmark renders a node's style attribute; a cell's alignment is
// added to it).
type mailSizing struct{}

func (mailSizing) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.(type) {
		case *ast.Image:
			n.SetAttributeString("style", []byte(imageStyle))
		case *east.Table:
			n.SetAttributeString("style", []byte(tableStyle))
			n.SetAttributeString("width", []byte("100%"))
		case *east.TableCell:
			n.SetAttributeString("style", []byte(cellStyle))
		}
		return ast.WalkContinue, nil
	})
}

// taskBoxes renders a task list item's box as a character.
type taskBoxes struct{}

func (taskBoxes) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(east.KindTaskCheckBox, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			box := taskOpen
			if n.(*east.TaskCheckBox).IsChecked {
				box = taskDone
			}
			_, _ = w.WriteString(box)
		}
		return ast.WalkContinue, nil
	})
}
