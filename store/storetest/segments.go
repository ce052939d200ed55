package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// Segments: saved, renamed, found by id or name, deleted; a name taken
// or a bad expression refused with nothing saved, the expression's error
// naming the position.
func testSegments(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "seg@x.io", Activate: true, Topics: []string{"updates"}})
	must(t, err)
	must2(t)(s.AddTags(ctx, a.ID, []string{"beta"}))
	seg, err := s.CreateSegment(ctx, "Beta testers", "topic:updates AND tag:beta")
	if err != nil || seg.ID == 0 || seg.CreatedAt.IsZero() {
		t.Fatalf("create: %+v %v", seg, err)
	}
	if _, err := s.CreateSegment(ctx, "Beta testers", "tag:beta"); !errors.Is(err, store.ErrSegmentName) {
		t.Fatalf("a name taken: %v", err)
	}
	for _, name := range []string{"", "123", " padded", "two\nlines"} {
		if _, err := s.CreateSegment(ctx, name, "tag:beta"); !errors.Is(err, store.ErrSegmentName) {
			t.Fatalf("name %q: %v", name, err)
		}
	}
	var se *segment.Error
	if _, err := s.CreateSegment(ctx, "Other", "tag:beta AND tag:nobody"); !errors.As(err, &se) || se.Pos != 14 {
		t.Fatalf("an unknown tag: %v", err)
	}
	other, err := s.CreateSegment(ctx, "Other", "NOT tag:beta")
	must(t, err)
	got, err := s.GetSegment(ctx, "Beta testers")
	if err != nil || got.ID != seg.ID || got.Expr != seg.Expr {
		t.Fatalf("by name: %+v %v", got, err)
	}
	if got, err := s.GetSegment(ctx, strconv.FormatInt(seg.ID, 10)); err != nil || got.Name != "Beta testers" {
		t.Fatalf("by id: %+v %v", got, err)
	}
	if _, err := s.UpdateSegment(ctx, other.ID, "Beta testers", "tag:beta"); !errors.Is(err, store.ErrSegmentName) {
		t.Fatalf("renamed onto another's name: %v", err)
	}
	upd, err := s.UpdateSegment(ctx, seg.ID, "Beta", "tag:beta")
	if err != nil || upd.Name != "Beta" || !upd.CreatedAt.Equal(seg.CreatedAt) {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if _, err := s.GetSegment(ctx, "Beta testers"); !errors.Is(err, store.ErrNoSegment) {
		t.Fatalf("the old name still finds it: %v", err)
	}
	// The old name is free again.
	must2(t)(s.CreateSegment(ctx, "Beta testers", "tag:beta"))
	list, err := s.ListSegments(ctx)
	if err != nil || len(list) != 3 || list[0].ID != seg.ID || list[0].Name != "Beta" {
		t.Fatalf("list: %+v %v", list, err)
	}
	must(t, s.DeleteSegment(ctx, seg.ID))
	if err := s.DeleteSegment(ctx, seg.ID); !errors.Is(err, store.ErrNoSegment) {
		t.Fatalf("deleted twice: %v", err)
	}
	if _, err := s.GetSegment(ctx, "Beta"); !errors.Is(err, store.ErrNoSegment) {
		t.Fatalf("a deleted segment's name: %v", err)
	}
	if _, err := s.UpdateSegment(ctx, seg.ID, "Beta", "tag:beta"); !errors.Is(err, store.ErrNoSegment) {
		t.Fatalf("update a deleted one: %v", err)
	}
	n, err := s.SegmentCount(ctx, "topic:updates AND tag:beta")
	if err != nil || n.Active != 1 || n.Matching != 1 {
		t.Fatalf("count: %+v %v", n, err)
	}
}

// person is the test's own copy of what it gave one subscriber.
type person struct {
	id     int64
	status store.Status
	topics []string
	tags   []string
	fields map[string]string
	joined string // YYYY-MM-DD
}

// A segment holds for exactly the people a brute-force evaluation over
// the test's own copy of a few hundred generated people says, counted
// and walked shard by shard (every page in walk-key order), whatever
// their topics, tags, field values, statuses and join days.
func testSegmentsMatchBruteForce(t *testing.T, h Harness, base store.Store) {
	ctx := context.Background()
	clocked, ok := base.(interface {
		WithClock(func() time.Time) *store.Redis
	})
	if !ok {
		t.Skip("the store takes no clock: the join days cannot be set")
	}
	day := time.Date(2025, 12, 20, 12, 0, 0, 0, time.UTC)
	s := clocked.WithClock(func() time.Time { return day })
	for _, d := range []store.FieldDef{
		{Name: "company", Type: store.FieldText},
		{Name: "seats", Type: store.FieldNumber},
		{Name: "renews", Type: store.FieldDate},
		{Name: "plan", Type: store.FieldChoice, Choices: []string{"free", "pro"}},
	} {
		must2(t)(s.DefineField(ctx, d))
	}
	rng := rand.New(rand.NewPCG(7, 32))
	pick := func(from []string) []string {
		var out []string
		for _, x := range from {
			if rng.IntN(2) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	var people []*person
	const n = 300
	for i := range n {
		if rng.IntN(10) == 0 {
			day = day.AddDate(0, 0, 1+rng.IntN(2)) // join days grow with the ids, as they do
		}
		email := fmt.Sprintf("seg%03d@x.io", i)
		topics := pick([]string{"digest", "updates"})
		if len(topics) == 0 {
			topics = []string{"updates"}
		}
		req := store.SubscribeRequest{Email: email, Topics: topics, Activate: rng.IntN(4) != 0}
		if !req.Activate {
			req.Outbox = entry("confirm:" + email)
		}
		sub, err := s.Subscribe(ctx, req)
		must(t, err)
		p := &person{id: sub.ID, status: sub.Status, topics: topics, joined: day.Format(time.DateOnly), fields: map[string]string{}}
		if p.tags = pick([]string{"alpha", "beta", "gamma"}); len(p.tags) > 0 {
			must2(t)(s.AddTags(ctx, sub.ID, p.tags))
		}
		vals := map[string]string{}
		if rng.IntN(3) > 0 {
			vals["seats"] = strconv.Itoa(rng.IntN(20))
		}
		if rng.IntN(2) == 0 {
			vals["plan"] = []string{"free", "pro"}[rng.IntN(2)]
		}
		if rng.IntN(2) == 0 {
			vals["renews"] = time.Date(2026, 1, 1+rng.IntN(20), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
		}
		if rng.IntN(2) == 0 {
			vals["company"] = []string{"Acme", "Big Co"}[rng.IntN(2)]
		}
		if len(vals) > 0 {
			got, err := s.SetFields(ctx, sub.ID, vals)
			must(t, err)
			p.fields = got
		}
		switch rng.IntN(12) {
		case 0:
			must2(t)(s.Unsubscribe(ctx, email))
			p.status, p.topics = store.Unsubscribed, nil
		case 1:
			must2(t)(s.Erase(ctx, email))
			p = nil
		}
		if p != nil {
			people = append(people, p)
		}
	}
	for _, expr := range []string{
		"topic:updates AND tag:beta AND NOT tag:alpha AND joined > 2026-01-01",
		"tag:alpha OR tag:gamma",
		"NOT (tag:beta OR topic:digest)",
		"field.plan = pro AND field.seats >= 10",
		"field.seats < 5 OR NOT field.renews <= 2026-01-10",
		"status:pending OR (status:unsubscribed AND tag:beta)",
		"joined <= 2025-12-25 OR joined = 2026-01-02",
		"joined != 2025-12-28 and field.company != Acme",
		`field.company = "Big Co" OR (tag:gamma AND NOT field.plan = free)`,
		"NOT NOT joined >= 2025-12-30 AND (field.seats > 3 OR field.seats = 0)",
	} {
		e, err := segment.Parse(expr)
		must(t, err)
		var want []int64
		var matching int64
		for _, p := range people {
			if bruteForce(e.Root, p) {
				matching++
				if p.status == store.Active {
					want = append(want, p.id)
				}
			}
		}
		got, err := s.SegmentCount(ctx, expr)
		if err != nil || got.Active != int64(len(want)) || got.Matching != matching {
			t.Fatalf("%s: counted %+v (%v), the brute force %d active of %d", expr, got, err, len(want), matching)
		}
		var walked []int64
		after := int64(0)
		for range n {
			page, err := s.SegmentAudienceByShard(ctx, expr, after, 7)
			must(t, err)
			for _, id := range page {
				if store.WalkKey(id) <= after {
					t.Fatalf("%s: id %d not past the cursor %d", expr, id, after)
				}
				after = store.WalkKey(id)
			}
			walked = append(walked, page...)
			if len(page) < 7 {
				break
			}
		}
		slices.Sort(walked)
		slices.Sort(want)
		if !slices.Equal(walked, want) {
			t.Fatalf("%s: walked %v, the brute force %v", expr, walked, want)
		}
		if len(want) == 0 && !strings.Contains(expr, "status:") {
			t.Fatalf("%s: matches nobody active: the test proves little", expr)
		}
	}
}

// bruteForce evaluates an expression for one person from the test's copy.
func bruteForce(n segment.Node, p *person) bool {
	switch n := n.(type) {
	case *segment.And:
		return bruteForce(n.L, p) && bruteForce(n.R, p)
	case *segment.Or:
		return bruteForce(n.L, p) || bruteForce(n.R, p)
	case *segment.Not:
		return !bruteForce(n.X, p)
	case *segment.Term:
		switch n.Kind {
		case segment.Topic:
			return slices.Contains(p.topics, n.Name)
		case segment.Tag:
			return slices.Contains(p.tags, n.Name)
		case segment.Status:
			return string(p.status) == n.Name
		case segment.Joined:
			return compare(strings.Compare(p.joined, n.Value), n.Op)
		case segment.Field:
			v, ok := p.fields[n.Name]
			if !ok {
				return n.Op == "!="
			}
			if n.Name == "seats" {
				a, _ := strconv.ParseFloat(v, 64)
				b, _ := strconv.ParseFloat(n.Value, 64)
				switch {
				case a < b:
					return compare(-1, n.Op)
				case a > b:
					return compare(1, n.Op)
				}
				return compare(0, n.Op)
			}
			return compare(strings.Compare(v, n.Value), n.Op)
		}
	}
	panic(fmt.Sprintf("node %T", n))
}

func compare(c int, op string) bool {
	return map[string]bool{"=": c == 0, "!=": c != 0, "<": c < 0, ">": c > 0, "<=": c <= 0, ">=": c >= 0}[op]
}
