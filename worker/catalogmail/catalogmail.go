// Package catalogmail is where the catalog meets the mailer: the
// templates a catalog makes mail from, and the check that every mail of a
// catalog renders before it is saved. The API takes Check and Builtins as
// functions and interfaces, so it never depends on the mailer itself.
package catalogmail

import (
	"fmt"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// Sources are the templates a catalog makes mail from: the stored
// ones, and each step written in the console as its kind's templates; the
// step names, for mailer.Compile.
func Sources(set *topics.Set, stored map[string]store.Template) (mailer.Sources, []string, error) {
	src := mailer.Sources{Stored: map[string]mailer.TemplateText{}}
	for name, t := range stored {
		src.Stored[name] = mailer.TemplateText{Text: t.Text, HTML: t.HTML}
	}
	for _, st := range set.Sequence.Steps {
		if st.Body == "" {
			continue
		}
		t, err := mailer.StepTemplate(st.Subject, st.Body)
		if err != nil {
			return src, nil, fmt.Errorf("step %q: body: %w", st.Template, err)
		}
		src.Stored[st.Template] = t
	}
	return src, set.Templates(), nil
}

// Check is the catalog's Checker (catalog.Checker): every kind and step renders.
func Check(set *topics.Set, stored map[string]store.Template) error {
	src, steps, err := Sources(set, stored)
	if err != nil {
		return err
	}
	// A stored template of a step no longer in the sequence is kept (the
	// step may come back) and not checked: no mail is made from it. The
	// API and the console save only the names of mails.
	if err := mailer.CheckTemplates(src, steps...); err != nil {
		return err
	}
	// A step written on the Sequence page sends its body; a template
	// stored under its name is what it sends once the body is cleared,
	// so it must render too.
	var shadowed []string
	for _, st := range set.Sequence.Steps {
		if _, ok := stored[st.Template]; ok && st.Body != "" {
			shadowed = append(shadowed, st.Template)
		}
	}
	if len(shadowed) == 0 {
		return nil
	}
	own := mailer.Sources{Stored: map[string]mailer.TemplateText{}}
	for name, t := range stored {
		own.Stored[name] = mailer.TemplateText{Text: t.Text, HTML: t.HTML}
	}
	return mailer.CheckTemplates(own, shadowed...)
}

// Builtins are the mailer's, for the API (api.BuiltinTemplates).
type Builtins struct{}

func (Builtins) Names() []string { return mailer.TemplateNames() }

func (Builtins) Builtin(name string) (text, html string, ok bool) {
	t, ok := mailer.Builtin(name)
	return t.Text, t.HTML, ok
}
