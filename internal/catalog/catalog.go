// Package catalog keeps the topics, the onboarding sequence and the mail
// templates that the publisher edits at run time (store.Catalog) in every
// process. The first role to start imports the topics file (or the
// built-in topics) and the template folder; from then on the stored
// catalog is the one truth: every role, the API and the commands read it,
// and a change made in the console reaches them within Recheck, without a
// restart. Reads never wait on Redis: they answer the catalog in hand.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// DefaultRecheck is how often Watch reads the stored generation: a change
// reaches every process within this time.
const DefaultRecheck = 2 * time.Second

// Snapshot is one catalog in effect.
type Snapshot struct {
	Set       *topics.Set
	Version   int64
	Gen       int64
	Templates map[string]store.Template
}

// Checker refuses a catalog its mail cannot be made from: a step whose
// template does not exist, a template that does not parse or uses a field
// mails do not have. The commands give the mailer's (the API never
// depends on the mailer).
type Checker func(set *topics.Set, templates map[string]store.Template) error

// Live is the catalog in one process.
type Live struct {
	st    store.CatalogStore
	check Checker
	log   *slog.Logger
	cur   atomic.Pointer[Snapshot]

	mu       sync.Mutex // orders Apply and the hooks
	onChange []func(Snapshot)
}

// Options configure Open.
type Options struct {
	// First is what the first start imports: the topics file's set or
	// the built-in one, and the template folder's files.
	First          *topics.Set
	FirstTemplates []store.Template
	// Check vets every save (nil: none).
	Check Checker
	Log   *slog.Logger
}

// Open imports o.First when nothing is stored, then reads the stored
// catalog. A role whose topics file differs from the stored topics says
// so once: the stored ones win (edit them in the console, or import the
// file again with `newsletter topics import`).
func Open(ctx context.Context, st store.CatalogStore, o Options) (*Live, error) {
	l := &Live{st: st, check: o.Check, log: o.Log}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	imported, err := st.ImportCatalog(ctx, *o.First, o.FirstTemplates, "first start")
	if err != nil {
		return nil, err
	}
	c, err := st.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	if c.Version == 0 {
		return nil, errors.New("the topics were imported but read back empty")
	}
	l.cur.Store(snapshot(c))
	if !imported && !reflect.DeepEqual(normalized(o.First), normalized(&c.Set)) {
		l.log.Warn("the stored topics are not the topics file's (or the built-in ones): the stored ones are used. Edit them in the console or the API, or replace them with `newsletter topics import FILE`",
			"version", c.Version)
	}
	if imported {
		l.log.Info("topics and sequence imported into Redis: edit them in the console from now on", "topics", len(c.Set.Topics), "steps", len(c.Set.Sequence.Steps), "templates", len(c.Templates))
	}
	return l, nil
}

// Fixed is a Live that never reads a store (tests, previews).
func Fixed(set *topics.Set, templates map[string]store.Template) *Live {
	l := &Live{log: slog.New(slog.DiscardHandler)}
	if templates == nil {
		templates = map[string]store.Template{}
	}
	l.cur.Store(&Snapshot{Set: set, Version: 1, Gen: 1, Templates: templates})
	return l
}

// normalized is s with nil and empty lists alike (JSON's round trip).
func normalized(s *topics.Set) topics.Set {
	out := topics.Set{Sequence: topics.Sequence{Topic: s.Sequence.Topic}}
	for _, t := range s.Topics {
		if len(t.Feeds) == 0 {
			t.Feeds = nil
		}
		out.Topics = append(out.Topics, t)
	}
	out.Sequence.Steps = append(out.Sequence.Steps, s.Sequence.Steps...)
	return out
}

func snapshot(c store.Catalog) *Snapshot {
	set := c.Set
	return &Snapshot{Set: &set, Version: c.Version, Gen: c.Gen, Templates: c.Templates}
}

// Current implements topics.Source.
func (l *Live) Current() *topics.Set { return l.cur.Load().Set }

// Snapshot is the whole catalog in effect.
func (l *Live) Snapshot() Snapshot { return *l.cur.Load() }

// At is the catalog in effect when it is at version, the one a writer
// read. A process that has not yet read a save made elsewhere (within
// Recheck) reads the store first, so a change is built over the catalog
// its writer saw, never over an older one this process still holds.
// Another version stored: ErrStale.
func (l *Live) At(ctx context.Context, version int64) (Snapshot, error) {
	snap := l.Snapshot()
	if snap.Version == version {
		return snap, nil
	}
	if err := l.Refresh(ctx); err != nil {
		return snap, err
	}
	if snap = l.Snapshot(); snap.Version != version {
		return snap, fmt.Errorf("topics: %w", ErrStale)
	}
	return snap, nil
}

// Latest is the stored catalog: read again when it moved, else the one
// in hand (a store that fails: the one in hand and the error).
func (l *Live) Latest(ctx context.Context) (Snapshot, error) {
	err := l.Refresh(ctx)
	return l.Snapshot(), err
}

// OnChange calls f with every catalog that takes effect after this call
// (the mailer's templates are rebuilt so).
func (l *Live) OnChange(f func(Snapshot)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange = append(l.onChange, f)
}

// Refresh reads the stored generation and, when it moved, the catalog.
func (l *Live) Refresh(ctx context.Context) error {
	if l.st == nil {
		return nil
	}
	g, err := l.st.CatalogGen(ctx)
	if err != nil || g == l.cur.Load().Gen {
		return err
	}
	c, err := l.st.Catalog(ctx)
	if err != nil {
		return err
	}
	l.apply(snapshot(c))
	return nil
}

// apply puts s in effect unless a newer one is (a save and a refresh may
// race: the higher generation wins).
func (l *Live) apply(s *Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.Gen <= l.cur.Load().Gen {
		return
	}
	l.cur.Store(s)
	for _, f := range l.onChange {
		f(*s)
	}
}

// Watch refreshes every interval until ctx ends. A store that fails keeps
// the catalog in hand (logged once per outage): stale topics are better
// than no mail.
func (l *Live) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultRecheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.Refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			l.log.Warn("catalog: cannot read the stored topics; going on with the ones in hand", "err", err)
			failing = true
		case err == nil && failing:
			l.log.Info("catalog: the stored topics are readable again")
			failing = false
		}
	}
}

// Error is a catalog refused: what is wrong, for a 400 or the form.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrStale is store.ErrCatalogStale: someone saved since this version.
var ErrStale = store.ErrCatalogStale

// SaveTopics checks set (topics.Set.Validate, no topic removed, every
// step's mail can be made) and stores it over version; the new catalog
// takes effect here at once and elsewhere within Recheck. A refused set
// is an *Error and nothing is stored.
func (l *Live) SaveTopics(ctx context.Context, set topics.Set, version int64, actor string) (Snapshot, error) {
	cur := l.Snapshot()
	if err := set.Validate(); err != nil {
		return cur, &Error{err}
	}
	if err := topics.CheckChange(cur.Set, &set); err != nil {
		return cur, &Error{err}
	}
	if l.check != nil {
		if err := l.check(&set, cur.Templates); err != nil {
			return cur, &Error{err}
		}
	}
	if _, err := l.st.SaveTopics(ctx, set, version, actor); err != nil {
		return cur, err
	}
	return l.reread(ctx)
}

// SaveTemplate checks t against the sequence in effect and stores it over
// version (0: the built-in one was read).
func (l *Live) SaveTemplate(ctx context.Context, t store.Template, version int64, actor string) (Snapshot, error) {
	cur := l.Snapshot()
	next := maps.Clone(cur.Templates)
	next[t.Name] = t
	if l.check != nil {
		if err := l.check(cur.Set, next); err != nil {
			return cur, &Error{err}
		}
	}
	if _, err := l.st.SaveTemplate(ctx, t, version, actor); err != nil {
		return cur, err
	}
	return l.reread(ctx)
}

// reread puts the stored catalog in effect right after a save.
func (l *Live) reread(ctx context.Context) (Snapshot, error) {
	c, err := l.st.Catalog(ctx)
	if err != nil {
		return l.Snapshot(), fmt.Errorf("saved, but not read back (it takes effect within %s): %w", DefaultRecheck, err)
	}
	l.apply(snapshot(c))
	return l.Snapshot(), nil
}

// History are the saved versions of what ("topics" or "template:NAME").
func (l *Live) History(ctx context.Context, what string, limit int) ([]store.CatalogChange, error) {
	if l.st == nil {
		return nil, nil
	}
	return l.st.CatalogHistory(ctx, what, limit)
}
