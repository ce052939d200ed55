package catalogmail_test

import (
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

func withStep(tmpl string, body string) *topics.Set {
	s := topics.Default(0)
	s.Sequence.Steps = append(s.Sequence.Steps, topics.Step{Template: tmpl, After: 24 * time.Hour})
	if body != "" {
		s.Sequence.Steps[1].Subject, s.Sequence.Steps[1].Body = "Tips", body
	}
	return s
}

// A template that renders with sample data alone (a reader with tags)
// is refused: for a real reader without tags every confirmation would fail.
func TestCheckRefusesTemplateThatFailsForARealReader(t *testing.T) {
	confirm, _ := mailer.Builtin(mailer.KindConfirm)
	stored := map[string]store.Template{"confirm": {Name: "confirm",
		Text: strings.Replace(confirm.Text, "{{end}}", "{{end}}{{index .Subscriber.Tags 0}}", 1)}}
	if err := catalogmail.Check(topics.Default(0), stored); err == nil || !strings.Contains(err.Error(), "index") {
		t.Fatalf("a confirm template that fails for a reader without tags: %v, want refused", err)
	}
}

// A layout without {{template "body" .}} (and so without the unsubscribe
// footer) passes the check: every HTML mail is sent empty.
func TestCheckPassesLayoutWithoutBody(t *testing.T) {
	stored := map[string]store.Template{"layout": {Name: "layout",
		HTML: `{{define "layout"}}<html><body><p>Hello</p></body></html>{{end}}`}}
	if err := catalogmail.Check(topics.Default(0), stored); err == nil || !strings.Contains(err.Error(), "body") {
		t.Errorf(`a layout with no {{template "body" .}} and no unsubscribe link: %v, want refused`, err)
	}
}

// A stored template of a step written on the Sequence page is checked
// too: it is what the step sends once its body is cleared.
func TestStoredTemplateOfWrittenStepChecked(t *testing.T) {
	set := withStep("tips", "Hello {{.Name}}")
	stored := map[string]store.Template{"tips": {Name: "tips", Text: "{{", HTML: "{{.Nope}}"}}
	if err := catalogmail.Check(set, stored); err == nil {
		t.Error("an unparsable stored template of a written step was accepted")
	}
}

// A step with a stored template can be removed from the sequence: the
// template is kept, unchecked, for the step's return.
func TestStepWithStoredTemplateCanBeRemoved(t *testing.T) {
	tips, _ := mailer.Builtin(mailer.KindWelcome)
	stored := map[string]store.Template{"tips": {Name: "tips", Text: tips.Text, HTML: tips.HTML}}
	if err := catalogmail.Check(withStep("tips", ""), stored); err != nil {
		t.Fatalf("set-up: %v", err)
	}
	if err := catalogmail.Check(topics.Default(0), stored); err != nil {
		t.Errorf("removing step tips is refused: %v", err)
	}
}
