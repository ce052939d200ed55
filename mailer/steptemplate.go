package mailer

import (
	"fmt"
	"regexp"
	"strings"
)

// action is a template action in a step's Markdown: {{.Name}},
// {{.Subscriber.Fields.company | default "there"}}.
var action = regexp.MustCompile(`\{\{.*?\}\}`)

// stepFooter ends the text part of a step written in the console as the
// built-in steps' text parts end (the HTML layout has its own footer).
const stepFooter = `
--
You receive {{if .Topic}}{{.Topic}}{{else}}this mail{{end}} because you subscribed with {{.Email}}.
{{with .Newsletter.PostalAddress}}{{.}}
{{end}}Unsubscribe or change what you get: {{.PreferencesURL}}
`

// StepTemplate makes the templates of a sequence step written in the
// console (a subject and a Markdown body) the templates of its kind: the
// body is rendered as an issue's is, and its template actions
// ({{.Name}}) are kept out of Markdown's way and run per reader.
func StepTemplate(subject, body string) (TemplateText, error) {
	var actions []string
	protected := action.ReplaceAllStringFunc(body, func(a string) string {
		actions = append(actions, a)
		// Letters and digits only: Markdown and its escapers leave it be.
		return fmt.Sprintf("nlstepaction%dx", len(actions)-1)
	})
	b, err := RenderMarkdown(protected)
	if err != nil {
		return TemplateText{}, err
	}
	restore := func(s string) string {
		for i, a := range actions {
			s = strings.ReplaceAll(s, fmt.Sprintf("nlstepaction%dx", i), a)
		}
		return s
	}
	return TemplateText{
		Text: `{{define "subject"}}` + subject + `{{end}}` + restore(b.Text) + "\n" + stepFooter,
		HTML: `{{define "body"}}` + restore(string(b.HTML)) + `{{end}}`,
	}, nil
}
