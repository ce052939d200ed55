package inbox

import (
	"bytes"
	"fmt"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/newsletter/newsletter/internal/mdlimit"
)

// markdown renders a message's body. goldmark without html.WithUnsafe
// is what makes it safe to show in a product's page: raw HTML is left
// out ("<!-- raw HTML omitted -->") and a link or image whose address is
// javascript:, vbscript:, file: or data: (but for images) loses it.
var markdown = goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Linkify))

// renderBody renders an event's Markdown body as the HTML the inbox
// keeps; mdlimit bounds the parser's work first, as it does for issues.
func renderBody(src string) (string, error) {
	if src == "" {
		return "", nil
	}
	if err := mdlimit.Check(src); err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := markdown.Convert([]byte(src), &b); err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	return b.String(), nil
}
