package mailer

import (
	"fmt"
	"net/url"
	"strings"
	texttemplate "text/template"
	"unicode/utf8"
)

// The weekly digest is sent as an issue: its archive page, feed entry
// and progress are an issue's, and it goes out the issue's way. Its
// content is made from the week's items by two templates a publisher may
// replace in NEWSLETTER_TEMPLATE_DIR: the subject, digest.txt's
// {{define "subject"}} (as it always was), and the Markdown body,
// digest.md. Both see .Period and .Entries; the per-reader fields are
// empty, since one issue goes to every reader.

// DigestBodyTemplate is the file of the digest issue's Markdown body.
const DigestBodyTemplate = "digest.md"

// MaxSubject is the longest subject an issue may have, in characters.
const MaxSubject = 200

// digestFuncs make an item's text safe inside Markdown: md escapes what
// Markdown would read as markup (an item titled "*new*" stays those
// characters), mdurl makes a link destination of a URL.
var digestFuncs = texttemplate.FuncMap{"md": MarkdownText, "mdurl": markdownURL}

// MarkdownText escapes s for Markdown's inline text: every ASCII
// punctuation character gets its backslash (CommonMark lets any of them
// be escaped) and line breaks become spaces, so s is one run of text
// whatever it holds.
func MarkdownText(s string) string {
	var b strings.Builder
	for _, r := range strings.Join(strings.Fields(s), " ") {
		if r < 128 && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// markdownURL is raw as a Markdown link destination: in angle brackets,
// with what cannot stand there (spaces, angle brackets, line breaks)
// percent-encoded.
func markdownURL(raw string) string {
	if u, err := url.Parse(strings.TrimSpace(raw)); err == nil {
		raw = u.String()
	}
	raw = strings.NewReplacer(" ", "%20", "<", "%3C", ">", "%3E", "\r", "", "\n", "").Replace(raw)
	return "<" + raw + ">"
}

func parseDigestBody(src string) (*texttemplate.Template, error) {
	t, err := texttemplate.New(DigestBodyTemplate).Option("missingkey=error").Funcs(digestFuncs).Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", DigestBodyTemplate, err)
	}
	return t, nil
}

// DigestIssue is the subject and Markdown body of period's digest issue,
// listing entries. The subject is one line of at most MaxSubject
// characters (cut there); an empty one is the built-in "What is new
// (<period>)".
func (r *templates) DigestIssue(period string, entries []Entry) (subject, body string, err error) {
	d := Data{Period: period, Entries: entries}
	subj, err := execCapped(r.text[KindDigest], "subject", d, r.partLimit())
	if err != nil {
		return "", "", fmt.Errorf("render digest subject: %w", err)
	}
	md, err := execCapped(r.digestBody, r.digestBody.Name(), d, r.partLimit())
	if err != nil {
		return "", "", fmt.Errorf("render %s: %w", DigestBodyTemplate, err)
	}
	subject = strings.Join(strings.Fields(subj), " ")
	if subject == "" {
		subject = "What is new (" + period + ")"
	}
	if utf8.RuneCountInString(subject) > MaxSubject {
		subject = strings.TrimSpace(string([]rune(subject)[:MaxSubject]))
	}
	return subject, md, nil
}
