package main

import (
	"html/template"
	"net/mail"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/mailer"
)

// archiveMarkdown is the mailer's Markdown renderer as the API's: the
// archive page shows the body as its mail's HTML part has it.
var archiveMarkdown = api.MarkdownFunc(func(src string) (template.HTML, error) {
	b, err := mailer.RenderMarkdown(src)
	return b.HTML, err
})

// publisher is the display name of NEWSLETTER_FROM, the archive feed's
// title and author ("" : the API's default).
func publisher(from string) string {
	if a, err := mail.ParseAddress(from); err == nil {
		return a.Name
	}
	return ""
}
