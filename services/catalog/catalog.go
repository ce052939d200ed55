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
	// first is what ImportFirst stores on an empty Redis.
	first Options
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

// Open reads the stored catalog. While nothing is stored (before the
// service's first start) it is o.First in this process alone, stored by
// nobody: only the service's roles import (ImportFirst), so a command run
// first, from a shell with another environment, cannot make its topics
// everyone's.
func Open(ctx context.Context, st store.CatalogStore, o Options) (*Live, error) {
	l := &Live{st: st, check: o.Check, log: o.Log, first: o}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	c, err := st.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	if c.Version == 0 {
		l.cur.Store(firstSnapshot(o))
		return l, nil
	}
	l.cur.Store(snapshot(c))
	return l, nil
}

// firstSnapshot is o.First and its templates, not stored (version and
// generation 0).
func firstSnapshot(o Options) *Snapshot {
	t := map[string]store.Template{}
	for _, x := range o.FirstTemplates {
		t[x.Name] = x
	}
	return &Snapshot{Set: o.First, Templates: t}
}

// ImportFirst stores the first catalog (Options.First and its templates)
// when nothing is stored yet: the service's roles call it at their start;
// of several starting at once one stores, and the others take what it
// stored.
func (l *Live) ImportFirst(ctx context.Context) error {
	o := l.first
	imported, err := l.st.ImportCatalog(ctx, *o.First, o.FirstTemplates, "first start")
	if err != nil {
		return err
	}
	c, err := l.st.Catalog(ctx)
	if err != nil {
		return err
	}
	if c.Version == 0 {
		return errors.New("the topics were imported but read back empty")
	}
	l.put(snapshot(c), true)
	if imported {
		l.log.Info("topics and sequence imported into Redis: edit them in the console from now on", "topics", len(c.Set.Topics), "steps", len(c.Set.Sequence.Steps), "templates", len(c.Templates))
	}
	return nil
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

// SameTopics reports whether a and b declare the same topics and
// sequence (nil and empty lists alike, as stored JSON reads back).
func SameTopics(a, b *topics.Set) bool {
	return reflect.DeepEqual(normalized(a), normalized(b))
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

// OnChange calls f with the catalog in effect now, at once, and with
// every one that takes effect after: under one lock, so no change falls
// between what a caller built from and its first call (the mailer's
// templates are rebuilt so). f runs with the lock held: it must be quick.
func (l *Live) OnChange(f func(Snapshot)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onChange = append(l.onChange, f)
	f(*l.cur.Load())
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
	// A generation lower than the one in hand is the store's truth too
	// (Redis restored from an older dump, a replica promoted behind):
	// it is taken, or this process would ignore every change from then on.
	l.put(snapshot(c), c.Gen < l.cur.Load().Gen)
	return nil
}

// apply puts s in effect unless a newer one is (a save and a refresh may
// race: the higher generation wins).
func (l *Live) apply(s *Snapshot) { l.put(s, false) }

func (l *Live) put(s *Snapshot, back bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.cur.Load(); s.Gen == cur.Gen || (s.Gen < cur.Gen && !back) {
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

// saveAttempts bounds how often a save is checked again when another
// part of the catalog changed while it was checked (store.ErrCatalogMoved).
const saveAttempts = 3

// SaveTopics checks set (topics.Set.Validate, no topic removed, every
// step's mail can be made) and stores it over version; the new catalog
// takes effect here at once and elsewhere within Recheck. A refused set
// is an *Error and nothing is stored. The set is checked against the
// templates it is stored beside: should a template be saved meanwhile
// (store.ErrCatalogMoved), it is checked again against the new ones.
func (l *Live) SaveTopics(ctx context.Context, set topics.Set, version int64, actor string) (Snapshot, error) {
	if err := set.Validate(); err != nil {
		return l.Snapshot(), &Error{err}
	}
	return l.save(ctx, func(cur Snapshot) (Snapshot, error) {
		if err := topics.CheckChange(cur.Set, &set); err != nil {
			return cur, &Error{err}
		}
		if l.check != nil {
			if err := l.check(&set, cur.Templates); err != nil {
				return cur, &Error{err}
			}
		}
		saved, err := l.st.SaveTopics(ctx, set, version, cur.Gen, actor)
		if err != nil {
			return cur, err
		}
		stored := set
		return Snapshot{Set: &stored, Version: saved.Version, Gen: saved.Gen, Templates: cur.Templates}, nil
	})
}

// SaveTemplate checks t against the sequence it is stored beside and
// stores it over version (0: the built-in one was read), as SaveTopics.
// The answer's Templates[t.Name].Version is the version saved.
func (l *Live) SaveTemplate(ctx context.Context, t store.Template, version int64, actor string) (Snapshot, error) {
	return l.save(ctx, func(cur Snapshot) (Snapshot, error) {
		next := maps.Clone(cur.Templates)
		next[t.Name] = t
		if l.check != nil {
			if err := l.check(cur.Set, next); err != nil {
				return cur, &Error{err}
			}
		}
		saved, err := l.st.SaveTemplate(ctx, t, version, cur.Gen, actor)
		if err != nil {
			return cur, err
		}
		t.Version = saved.Version
		next[t.Name] = t
		return Snapshot{Set: cur.Set, Version: cur.Version, Gen: saved.Gen, Templates: next}, nil
	})
}

// save runs one save over the catalog in hand, read again and checked
// again while another part changes under it. What it stored is the
// answer (not a read after it, which may hold someone else's later save)
// and takes effect here at once.
func (l *Live) save(ctx context.Context, try func(cur Snapshot) (Snapshot, error)) (Snapshot, error) {
	for attempt := 1; ; attempt++ {
		saved, err := try(l.Snapshot())
		if errors.Is(err, store.ErrCatalogMoved) && attempt < saveAttempts {
			if rerr := l.Refresh(ctx); rerr != nil {
				return l.Snapshot(), rerr
			}
			continue
		}
		if errors.Is(err, store.ErrCatalogMoved) {
			return saved, fmt.Errorf("%w (saved meanwhile by others)", ErrStale)
		}
		if err != nil {
			return saved, err
		}
		l.apply(&saved)
		return saved, nil
	}
}

// History are the saved versions of what ("topics" or "template:NAME").
func (l *Live) History(ctx context.Context, what string, limit int) ([]store.CatalogChange, error) {
	if l.st == nil {
		return nil, nil
	}
	return l.st.CatalogHistory(ctx, what, limit)
}
