package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// openCatalog puts the stored topics, sequence and templates in effect in
// this process. On an empty Redis they are this process's own
// (NEWSLETTER_TOPICS_FILE or the built-in topics, the files of
// NEWSLETTER_TEMPLATE_DIR) until a role of the service stores them
// (importCatalog); from then on the stored ones are the truth for every
// role and command.
func openCatalog(ctx context.Context, a *app) (*catalog.Live, error) {
	files, err := mailer.ReadDir(a.cfg.TemplateDir, a.cfg.Topics.Templates()...)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_TEMPLATE_DIR: %w", err)
	}
	var first []store.Template
	for name, t := range files {
		first = append(first, store.Template{Name: name, Text: t.Text, HTML: t.HTML})
	}
	set := a.cfg.Topics
	if a.cfg.TopicsFile == "" {
		// A service of an earlier release recorded the topics it ran with
		// (its topics file's): those, not the built-in ones, are the
		// first import of a role started without the file.
		legacy, err := a.store.LegacyServiceTopics(ctx)
		if err != nil {
			return nil, err
		}
		if legacy != nil {
			seeded := &topics.Set{Topics: legacy.Topics, Sequence: a.cfg.Topics.Sequence}
			if err := seeded.Validate(); err != nil {
				a.log.Warn("the earlier release's recorded topics do not pass today's checks; the first import takes this role's", "err", err)
			} else {
				set = seeded
			}
		}
	}
	live, err := catalog.Open(ctx, a.store, catalog.Options{First: set, FirstTemplates: first, Check: catalogmail.Check, Log: a.log})
	if err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	if snap := live.Snapshot(); a.cfg.TopicsFile != "" && snap.Version > 0 && !catalog.SameTopics(set, snap.Set) {
		a.log.Warn("NEWSLETTER_TOPICS_FILE differs from the stored topics: the stored ones are used (edit them in the console, or replace them with `newsletter topics import FILE`)",
			"version", snap.Version)
	}
	return live, nil
}

// importCatalog stores this role's topics, sequence and templates when
// nothing is stored yet (a role of the service only: a command run first
// does not make its environment everyone's), and says when the stored
// templates are not this role's folder's.
func importCatalog(ctx context.Context, a *app) error {
	if err := a.catalog.ImportFirst(ctx); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	if a.cfg.TemplateDir == "" {
		return nil
	}
	files, err := mailer.ReadDir(a.cfg.TemplateDir, a.cfg.Topics.Templates()...)
	if err != nil {
		return fmt.Errorf("NEWSLETTER_TEMPLATE_DIR: %w", err)
	}
	if !sameTemplates(files, a.catalog.Snapshot().Templates) {
		a.log.Warn("NEWSLETTER_TEMPLATE_DIR differs from the stored templates: the stored ones are used (edit them in the console, or GET/PUT /api/templates/{name})")
	}
	return nil
}

// sameTemplates reports whether the folder's files are the stored
// templates.
func sameTemplates(files map[string]mailer.TemplateText, stored map[string]store.Template) bool {
	return maps.EqualFunc(files, stored, func(f mailer.TemplateText, s store.Template) bool { return f.Text == s.Text && f.HTML == s.HTML })
}

// liveRenderer is the renderer of the catalog in effect, made again on
// every change (a change that does not render keeps the one in hand:
// the checks refused it when it was saved, so only an older release's
// data could get here). The hook also runs at once on the catalog in
// effect then, so no change falls between the first build and it.
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
		if s.Gen == snap.Gen {
			return // what r was built from
		}
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
