package mailer

import (
	"fmt"
	"strings"
	texttemplate "text/template"
	"unicode/utf8"
)

// A feed in mode each (the topics file) sends each new entry as an issue
// of its own. Its subject is the entry's title; its Markdown body is made
// by post.md, which a publisher may replace in NEWSLETTER_TEMPLATE_DIR as
// digest.md. The template sees the entry (.Title, .URL, .Summary: text,
// the feed's HTML already reduced to its words) and its functions md and
// mdurl, so nothing the feed's author wrote can become markup: the issue
// is then rendered as any other (RenderMarkdown: raw HTML escaped, unsafe
// links dropped).

// PostBodyTemplate is the file of a feed post's Markdown body.
const PostBodyTemplate = "post.md"

func parsePostBody(src string) (*texttemplate.Template, error) {
	t, err := texttemplate.New(PostBodyTemplate).Option("missingkey=error").Funcs(digestFuncs).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", PostBodyTemplate, err)
	}
	return t, nil
}

// PostIssue is the subject and Markdown body of the issue a feed's entry
// becomes: the subject is the entry's title on one line, cut at
// MaxSubject characters (its URL when it has none).
func (r *templates) PostIssue(e Entry) (subject, body string, err error) {
	md, err := execCapped(r.postBody, r.postBody.Name(), e, r.partLimit())
	if err != nil {
		return "", "", fmt.Errorf("render %s: %w", PostBodyTemplate, err)
	}
	subject = strings.Join(strings.Fields(e.Title), " ")
	if subject == "" {
		subject = strings.Join(strings.Fields(e.URL), " ")
	}
	if utf8.RuneCountInString(subject) > MaxSubject {
		subject = strings.TrimSpace(string([]rune(subject)[:MaxSubject-1])) + "…"
	}
	return subject, md, nil
}
