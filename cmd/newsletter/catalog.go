package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/newsletter/newsletter/internal/catalog"
	"github.com/newsletter/newsletter/internal/catalog/catalogmail"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// openCatalog puts the stored topics, sequence and templates in effect in
// this process: the first start imports NEWSLETTER_TOPICS_FILE (or the
// built-in topics) and the files of NEWSLETTER_TEMPLATE_DIR; after that
// the stored ones are the truth for every role and command.
func openCatalog(ctx context.Context, a *app) (*catalog.Live, error) {
	files, err := mailer.ReadDir(a.cfg.TemplateDir, a.cfg.Topics.Templates()...)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_TEMPLATE_DIR: %w", err)
	}
	var first []store.Template
	for name, t := range files {
		first = append(first, store.Template{Name: name, Text: t.Text, HTML: t.HTML})
	}
	live, err := catalog.Open(ctx, a.store, catalog.Options{First: a.cfg.Topics, FirstTemplates: first, Check: catalogmail.Check, Log: a.log})
	if err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	if a.cfg.TemplateDir != "" && !sameTemplates(files, live.Snapshot().Templates) {
		a.log.Warn("NEWSLETTER_TEMPLATE_DIR differs from the stored templates: the stored ones are used (edit them in the console, or GET/PUT /api/templates/{name})")
	}
	return live, nil
}

// sameTemplates reports whether the folder's files are the stored
// templates.
func sameTemplates(files map[string]mailer.TemplateText, stored map[string]store.Template) bool {
	return maps.EqualFunc(files, stored, func(f mailer.TemplateText, s store.Template) bool { return f.Text == s.Text && f.HTML == s.HTML })
}

// liveRenderer is the renderer of the catalog in effect, made again on
// every change (a change that does not render keeps the one in hand:
// checkCatalog refused it when it was saved, so only an older release's
// data could get here).
func liveRenderer(a *app) (*mailer.Renderer, error) {
	snap := a.catalog.Snapshot()
	src, steps, err := catalogmail.Sources(snap.Set, snap.Templates)
	if err != nil {
		return nil, err
	}
	r, err := mailer.Compile(src, steps...)
	if err != nil {
		return nil, fmt.Errorf("the stored templates: %w", err)
	}
	a.catalog.OnChange(func(s catalog.Snapshot) {
		src, steps, err := catalogmail.Sources(s.Set, s.Templates)
		if err == nil {
			var n *mailer.Renderer
			if n, err = mailer.Compile(src, steps...); err == nil {
				r.Replace(n)
				return
			}
		}
		a.log.Error("the changed templates do not render; mail goes on with the ones before", "gen", s.Gen, "err", err)
	})
	return r, nil
}
