package issues

import (
	"fmt"
	"regexp"
	"strings"
)

// templateAction finds what looks like a template action in an issue's
// body: "{{.Name}}", "{{ .Subscriber.Fields.company }}".
var templateAction = regexp.MustCompile(`\{\{[^{}\n]{0,200}\}\}`)

// maxNamedActions bounds the actions a warning quotes.
const maxNamedActions = 3

// BodyWarnings are what a publisher should hear of a body that is saved
// as it is: an issue's body is Markdown, rendered once for every reader,
// not a template, so a "{{.Name}}" in it reaches readers literally.
func BodyWarnings(body string) []string {
	found := templateAction.FindAllString(body, maxNamedActions+1)
	if len(found) == 0 {
		return nil
	}
	quoted := make([]string, 0, maxNamedActions)
	for _, a := range found[:min(len(found), maxNamedActions)] {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	more := ""
	if len(found) > maxNamedActions {
		more = " and more"
	}
	return []string{fmt.Sprintf("the body holds %s%s: an issue's body is Markdown, not a template, so every reader would see it as written. "+
		"Write the words themselves (\"Hello,\" rather than \"Hello {{.Name}},\"); a greeting by name belongs in a sequence step, whose body is a template",
		strings.Join(quoted, ", "), more)}
}
