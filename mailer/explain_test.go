package mailer

import (
	"errors"
	"strings"
	"testing"
)

// TestTemplateErrorsInPlainWords: a template mistake comes back naming the
// template, its part and the line as written (an HTML part's lines count
// from its own first line, not the layout's), in words a publisher reads:
// the name they typed, the field they may have meant, the fields and
// functions they may use.
func TestTemplateErrorsInPlainWords(t *testing.T) {
	const subject = `{{define "subject"}}Hi{{end}}`
	for name, c := range map[string]struct {
		stored   map[string]TemplateText
		where    string
		line     int
		want     []string
		notWants []string
	}{
		"a function that is a field without its dot": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "\n\nHello {{Nmae}}"}},
			where:  "template welcome, text part, line 3", line: 3,
			want: []string{`"Nmae" is not a field or function you can use here (did you mean .Name?)`, "fields: .Email, .Name, .ConfirmURL", "functions: and, default,"},
		},
		"a mistyped field": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "\nHello {{.Nmae}}"}},
			where:  "template welcome, text part, line 2", line: 2,
			want: []string{`"Nmae" is not a field you can use here (did you mean .Name?); fields: .Email, .Name,`},
		},
		"a reader's field in the HTML part": {
			stored: map[string]TemplateText{KindWelcome: {HTML: "{{define \"body\"}}<p>\n\n\n{{.Subscriber.Emial}}</p>{{end}}"}},
			where:  "template welcome, HTML part, line 4", line: 4,
			want: []string{`"Emial" is not a field you can use here (did you mean .Subscriber.Email?); fields: .Subscriber.Email, .Subscriber.Name, .Subscriber.Fields, .Subscriber.Tags`},
		},
		"a field of no mail": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "Hello {{.Nickname}}"}},
			where:  "template welcome, text part, line 1", line: 1,
			want: []string{`"Nickname" is not a field you can use here; fields:`}, notWants: []string{"did you mean", ".Reader"},
		},
		"an item only some readers have": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "Hi {{index .Subscriber.Tags 0}}"}},
			where:  "template welcome, text part, line 1", line: 1,
			want: []string{"the list has no such item here", "for a reader with no name, custom fields or tags"},
		},
		"an if without its end": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "{{if .Name}}Hi"}},
			where:  "template welcome, text part, line 1", line: 1, want: []string{"needs its {{end}}"},
		},
		"an if without a value": {
			stored: map[string]TemplateText{KindWelcome: {Text: subject + "{{if}}x{{end}}"}},
			where:  "template welcome, text part, line 1", line: 1, want: []string{"{{if}} needs a value, such as {{if .Name}}"},
		},
	} {
		err := CheckTemplates(Sources{Stored: c.stored})
		var te *TemplateError
		if !errors.As(err, &te) {
			t.Errorf("%s: %v, want a *TemplateError", name, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, c.where+": ") || (c.line > 0 && te.Line != c.line) {
			t.Errorf("%s: %q, want it at %q (line %d)", name, msg, c.where, c.line)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", name, msg, w)
			}
		}
		for _, w := range append(c.notWants, "executing", "mailer.", "can't evaluate") {
			if strings.Contains(msg, w) {
				t.Errorf("%s: %q still says %q", name, msg, w)
			}
		}
		if te.Err == nil || !strings.Contains(te.Err.Error(), "template: ") {
			t.Errorf("%s: Go's own error is not kept: %v", name, te.Err)
		}
	}
}

// TestLayoutErrorsNameTheLayout: a mistake in the layout is the layout's,
// at its own line, whichever mail's HTML showed it.
func TestLayoutErrorsNameTheLayout(t *testing.T) {
	layout, _ := Builtin(TemplateLayout)
	broken := strings.Replace(layout.HTML, "\n", "\n{{.Newsletter.Nmae}}", 1)
	err := CheckTemplates(Sources{Stored: map[string]TemplateText{TemplateLayout: {HTML: broken}}})
	var te *TemplateError
	if !errors.As(err, &te) || te.Template != TemplateLayout || te.Line != 2 || te.Part != "" ||
		!strings.Contains(err.Error(), `"Nmae" is not a field you can use here (did you mean .Newsletter.Name?)`) {
		t.Fatalf("%v (%+v), want the layout's line 2 naming .Newsletter.Name", err, te)
	}
}

// TestGreetingFallsBack: the shipped mails greet a reader without a name
// with "Hello there," and one with a name by it, in both parts, and stay
// preparable (the fallback is filled in per reader: TestPreparedEqualsFullRender).
func TestGreetingFallsBack(t *testing.T) {
	r, err := NewRenderer("", "getting-started", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{KindWelcome, KindDigest, KindEvents, "getting-started", "best-of"} {
		if !r.cur.Load().preparable[kind] {
			t.Errorf("%s: not preparable with its fallback", kind)
		}
		for name, want := range map[string]string{"": "Hello there,", "Ada": "Hello Ada,"} {
			d := sampleData()
			d.Name = name
			m, err := r.Render(kind, d)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(m.Text, want) || !strings.Contains(m.HTML, want) {
				t.Errorf("%s for %q: want %q in both parts:\n%s\n%s", kind, name, want, m.Text, m.HTML)
			}
		}
	}
}
