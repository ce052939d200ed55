package mailer

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheckTemplatesRefusesUnboundedWork: a template saved with no bound
// on its work or its output is refused with the reason, before it runs:
// one that calls itself, one that ranges over a number or a variable,
// ranges nested three deep, and one that writes megabytes with sample
// data. The built-in templates pass.
func TestCheckTemplatesRefusesUnboundedWork(t *testing.T) {
	if err := CheckTemplates(Sources{Stored: map[string]TemplateText{}}); err != nil {
		t.Fatalf("the built-in templates: %v", err)
	}
	welcome, _ := Builtin(KindWelcome)
	withText := func(text string) map[string]TemplateText {
		return map[string]TemplateText{KindWelcome: {Text: `{{define "subject"}}Hi{{end}}` + text + `{{.PreferencesURL}}`, HTML: welcome.HTML}}
	}
	for name, c := range map[string]struct{ stored map[string]TemplateText }{
		"recursion":     {withText(`{{define "loop"}}{{range .Entries}}{{template "loop" $}}{{end}}{{end}}{{template "loop" .}}`)},
		"mutual":        {withText(`{{define "a"}}{{template "b" .}}{{end}}{{define "b"}}{{template "a" .}}{{end}}{{template "a" .}}`)},
		"a number":      {withText(`{{range 1000000000}}{{end}}`)},
		"a variable":    {withText(`{{$n := len .Email}}{{range $n}}x{{end}}`)},
		"three deep":    {withText(`{{range .Entries}}{{range $.Entries}}{{range $.Entries}}x{{end}}{{end}}{{end}}`)},
		"huge output":   {withText(`{{range .Entries}}{{printf "%0900000d" 0}}{{end}}`)},
		"layout recurs": {map[string]TemplateText{TemplateLayout: {HTML: `{{define "layout"}}{{template "body" .}}{{.PreferencesURL}}{{template "layout" .}}{{end}}`}}},
	} {
		err := CheckTemplates(Sources{Stored: c.stored})
		if err == nil {
			t.Errorf("%s: saved", name)
			continue
		}
		msg := err.Error()
		t.Logf("%s: %v", name, err)
		if !strings.Contains(msg, "recurse") && !strings.Contains(msg, "a range must go over the mail's data") &&
			!strings.Contains(msg, "nest fewer ranges") && !strings.Contains(msg, "output is over") {
			t.Errorf("%s: refused without its reason: %v", name, err)
		}
	}
	// Two ranges nested with a small body are within the bound.
	if err := CheckTemplates(Sources{Stored: withText(`{{range .Entries}}{{range $.Subscriber.Tags}}{{.}}{{end}}{{end}}`)}); err != nil {
		t.Errorf("two nested ranges: %v", err)
	}
}

// TestRenderIsCapped: a render at send time whose output passes
// MaxRenderBytes (a template within its cost, fed more data than its
// check saw) stops there with ErrRenderLimit; a write after the deadline
// fails too.
func TestRenderIsCapped(t *testing.T) {
	welcome, _ := Builtin(KindWelcome)
	r, err := Compile(Sources{Stored: map[string]TemplateText{KindWelcome: {
		Text: `{{define "subject"}}Hi{{end}}{{range .Entries}}{{printf "%0900000d" 0}}{{end}}{{.PreferencesURL}}`, HTML: welcome.HTML}}})
	if err != nil {
		t.Fatal(err)
	}
	d := sampleData()
	d.Entries = make([]Entry, 10) // 9 MB of text
	if _, err := r.Render(KindWelcome, d); !errors.Is(err, ErrRenderLimit) {
		t.Fatalf("a 9 MB part rendered: %v", err)
	}
	d.Entries = d.Entries[:2]
	if _, err := r.Render(KindWelcome, d); err != nil {
		t.Fatalf("a 1.8 MB part: %v", err)
	}
	w := &cappedWriter{left: 10, deadline: time.Now().Add(-time.Second)}
	if _, err := w.Write([]byte("x")); !errors.Is(err, ErrRenderLimit) {
		t.Fatalf("a write past the deadline: %v", err)
	}
}
