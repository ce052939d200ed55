package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// Two processes: one removes step "tips" from the sequence, the other
// (not yet refreshed, within Recheck) saves template "tips". Each save is
// checked against the other half of the catalog as its process holds it,
// and the two CAS fields differ, so both are stored; the stored catalog
// then fails every later check and nothing can be saved any more.
func TestCrossDocumentRaceFreezesCatalog(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.NewRedis(rdb)
	ctx := context.Background()

	first := topics.Default(0)
	first.Sequence.Steps = append(first.Sequence.Steps, topics.Step{Template: "tips", After: 24 * time.Hour, Subject: "Tips", Body: "Hello {{.Name}}"})
	opts := catalog.Options{First: first, Check: catalogmail.Check}
	one, err := catalog.Open(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.ImportFirst(ctx); err != nil {
		t.Fatal(err)
	}
	two, err := catalog.Open(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}

	// one: remove step tips.
	next := *one.Current()
	next.Sequence.Steps = next.Sequence.Steps[:1]
	if _, err := one.SaveTopics(ctx, next, one.Snapshot().Version, "ann"); err != nil {
		t.Fatal(err)
	}
	// two, before its refresh: save template tips (a step in its view).
	w, _ := mailer.Builtin(mailer.KindWelcome)
	if _, err := two.SaveTemplate(ctx, store.Template{Name: "tips", Text: w.Text, HTML: w.HTML}, 0, "bob"); err != nil {
		t.Logf("refused: %v", err)
	}
	// Now any change is refused.
	if err := one.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	again := *one.Current()
	again.Topics = append(append([]topics.Topic(nil), again.Topics...), topics.Topic{ID: "essays", Name: "Essays"})
	if _, err := one.SaveTopics(ctx, again, one.Snapshot().Version, "ann"); err != nil {
		t.Errorf("after the race, an unrelated save is refused: %v", err)
	}
}

// The stored generation going back (Redis restored from an older
// snapshot, a failover to a replica behind, the key re-imported) leaves a
// running process on its catalog for good: apply drops every lower gen,
// and At answers ErrStale to every save made there.
func TestGenerationGoingBackIsIgnoredForGood(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.NewRedis(rdb)
	ctx := context.Background()
	one := open(t, st, topics.Default(0))
	for i := 0; i < 3; i++ {
		next := *one.Current()
		next.Topics = append(append([]topics.Topic(nil), next.Topics...), topics.Topic{ID: "t" + string(rune('a'+i)), Name: "T"})
		if _, err := one.SaveTopics(ctx, next, one.Snapshot().Version, "x"); err != nil {
			t.Fatal(err)
		}
	}
	mr.FlushAll() // a restore of an older dump, in short
	two := open(t, st, topics.Default(0))
	if err := one.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if one.Snapshot().Version != two.Snapshot().Version {
		t.Errorf("process one keeps version %d (gen %d); stored is version %d (gen %d)", one.Snapshot().Version, one.Snapshot().Gen, two.Snapshot().Version, two.Snapshot().Gen)
	}
	if _, err := one.At(ctx, two.Snapshot().Version); err != nil {
		t.Errorf("a save over the stored version in process one: %v", err)
	}
}

// racing runs once before a Catalog read: another process's save landing
// between this process's save and its read back.
type racing struct {
	store.CatalogStore
	once func()
}

func (r *racing) Catalog(ctx context.Context) (store.Catalog, error) {
	if f := r.once; f != nil {
		r.once = nil
		f()
	}
	return r.CatalogStore.Catalog(ctx)
}

// SaveTopics answers the catalog read back after the save, which may be a
// later save of someone else: the writer is told its change is that
// version, and its next save over it overwrites the other's unseen.
func TestSaveAnswersAnotherSavesVersion(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.NewRedis(rdb)
	ctx := context.Background()
	r := &racing{CatalogStore: st}
	one, err := catalog.Open(ctx, r, catalog.Options{First: topics.Default(0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.ImportFirst(ctx); err != nil {
		t.Fatal(err)
	}
	mine := *one.Current()
	mine.Topics = append(append([]topics.Topic(nil), mine.Topics...), topics.Topic{ID: "mine", Name: "Mine"})
	r.once = func() {
		theirs := *topics.Default(0)
		theirs.Topics = append(theirs.Topics, topics.Topic{ID: "mine", Name: "Mine"}, topics.Topic{ID: "theirs", Name: "Theirs"})
		gen, err := st.CatalogGen(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SaveTopics(ctx, theirs, 2, gen, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := one.SaveTopics(ctx, mine, one.Snapshot().Version, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if saved.Version != 2 {
		t.Errorf("ann's save stored version 2, but SaveTopics answers version %d (bob's)", saved.Version)
	}
}
