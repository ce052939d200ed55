package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// Tags: added and removed atomically, read with the subscriber (by
// address, by id, in a batch), registered as known; bad names and too
// many refused with nothing changed; an unsubscribe keeps them, an
// erasure forgets them (and their bits: a segment finds nobody).
func testTags(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "tag@x.io", Activate: true})
	must(t, err)
	b, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "tag2@x.io", Activate: true})
	must(t, err)
	got, err := s.AddTags(ctx, a.ID, []string{"vip", "beta", "vip"})
	if err != nil || !slices.Equal(got, []string{"beta", "vip"}) {
		t.Fatalf("add tags: %v %v", got, err)
	}
	for _, bad := range [][]string{{"Beta"}, {""}, {"a b"}, {strings.Repeat("x", store.MaxTagLength+1)}, {"ok", "no,comma"}} {
		if _, err := s.AddTags(ctx, a.ID, bad); !errors.Is(err, store.ErrBadTag) {
			t.Fatalf("tags %q: %v", bad, err)
		}
	}
	if _, err := s.AddTags(ctx, 999999, []string{"x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tags of an unknown id: %v", err)
	}
	many := make([]string, store.MaxTagsPerPerson)
	for i := range many {
		many[i] = "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	if _, err := s.AddTags(ctx, a.ID, many); !errors.Is(err, store.ErrBadTag) {
		t.Fatalf("more than %d tags in all: %v", store.MaxTagsPerPerson, err)
	}
	must2(t)(s.AddTags(ctx, b.ID, []string{"beta"}))
	if got, _ := s.Get(ctx, "tag@x.io"); !slices.Equal(got.Tags, []string{"beta", "vip"}) {
		t.Fatalf("get: tags %v", got.Tags)
	}
	if got, _ := s.GetByID(ctx, a.ID); !slices.Equal(got.Tags, []string{"beta", "vip"}) {
		t.Fatalf("get by id: tags %v", got.Tags)
	}
	subs, err := s.SubscribersByID(ctx, []int64{b.ID, a.ID, 0})
	must(t, err)
	if !slices.Equal(subs[0].Tags, []string{"beta"}) || !slices.Equal(subs[1].Tags, []string{"beta", "vip"}) || subs[2].Tags != nil {
		t.Fatalf("by id in a batch: %v %v %v", subs[0].Tags, subs[1].Tags, subs[2].Tags)
	}
	known, err := s.KnownTags(ctx)
	if err != nil || !slices.Equal(known, []string{"beta", "vip"}) {
		t.Fatalf("known tags: %v %v (the refused ones must not be registered)", known, err)
	}
	got, err = s.RemoveTags(ctx, a.ID, []string{"vip", "never"})
	if err != nil || !slices.Equal(got, []string{"beta"}) {
		t.Fatalf("remove: %v %v", got, err)
	}
	got, err = s.RemoveTags(ctx, b.ID, []string{"beta"})
	if err != nil || got != nil {
		t.Fatalf("remove the last: %v %v", got, err)
	}
	if all, _ := s.TagsOf(ctx, []int64{a.ID, b.ID}); !slices.Equal(all[0], []string{"beta"}) || all[1] != nil {
		t.Fatalf("tags of both: %v", all)
	}
	must2(t)(s.Unsubscribe(ctx, "tag@x.io"))
	if got, _ := s.Get(ctx, "tag@x.io"); !slices.Equal(got.Tags, []string{"beta"}) {
		t.Fatalf("an unsubscribe keeps the tags (they come back with the person): %v", got.Tags)
	}
	must2(t)(s.Erase(ctx, "tag@x.io"))
	if all, _ := s.TagsOf(ctx, []int64{a.ID}); all[0] != nil {
		t.Fatalf("tags kept after an erasure: %v", all[0])
	}
	if n, err := s.SegmentCount(ctx, "tag:beta OR tag:vip"); err != nil || n.Matching != 0 {
		t.Fatalf("an erased person is still in a tag's bitmap: %+v %v", n, err)
	}
}

// Fields: declared with a type (a name, a type, choices checked), a
// value checked against its declaration and normalised, merged into the
// person's values, cleared by "", read with the subscriber; an erasure
// forgets them.
func testFields(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	for _, d := range []store.FieldDef{
		{Name: "company", Type: store.FieldText},
		{Name: "seats", Type: store.FieldNumber},
		{Name: "renews", Type: store.FieldDate},
		{Name: "plan", Type: store.FieldChoice, Choices: []string{"free", "pro"}},
	} {
		must2(t)(s.DefineField(ctx, d))
	}
	for _, bad := range []store.FieldDef{
		{Name: "Company", Type: store.FieldText},
		{Name: "1st", Type: store.FieldText},
		{Name: "x", Type: "bool"},
		{Name: "y", Type: store.FieldChoice},
		{Name: "z", Type: store.FieldText, Choices: []string{"a"}},
		{Name: "seats", Type: store.FieldText}, // a field keeps its type
	} {
		if _, err := s.DefineField(ctx, bad); !errors.Is(err, store.ErrBadField) {
			t.Fatalf("declaration %+v: %v", bad, err)
		}
	}
	// A choice field's choices may change.
	must2(t)(s.DefineField(ctx, store.FieldDef{Name: "plan", Type: store.FieldChoice, Choices: []string{"free", "pro", "team"}}))
	defs, err := s.FieldDefs(ctx)
	must(t, err)
	if len(defs) != 4 || defs[0].Name != "company" || defs[1].Name != "plan" || len(defs[1].Choices) != 3 {
		t.Fatalf("declarations: %+v", defs)
	}
	a, err := s.Subscribe(ctx, store.SubscribeRequest{Email: "f@x.io", Activate: true})
	must(t, err)
	got, err := s.SetFields(ctx, a.ID, map[string]string{"company": "Acme <&>", "seats": " 12.50 ", "renews": "2026-03-01", "plan": "team"})
	want := map[string]string{"company": "Acme <&>", "seats": "12.5", "renews": "2026-03-01", "plan": "team"}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("set fields: %v %v", got, err)
	}
	for _, bad := range []map[string]string{
		{"seats": "twelve"}, {"renews": "1 March"}, {"plan": "gold"}, {"nope": "x"}, {"company": "two\nlines"},
		{"company": "ok", "seats": "NaN"},
	} {
		if _, err := s.SetFields(ctx, a.ID, bad); !errors.Is(err, store.ErrBadField) {
			t.Fatalf("values %v: %v", bad, err)
		}
	}
	if _, err := s.SetFields(ctx, 999999, map[string]string{"company": "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fields of an unknown id: %v", err)
	}
	got, err = s.SetFields(ctx, a.ID, map[string]string{"company": "", "seats": "3"})
	want = map[string]string{"seats": "3", "renews": "2026-03-01", "plan": "team"}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("merge and clear: %v %v", got, err)
	}
	if sub, _ := s.Get(ctx, "f@x.io"); !maps.Equal(sub.Fields, want) {
		t.Fatalf("get: fields %v", sub.Fields)
	}
	if subs, _ := s.SubscribersByID(ctx, []int64{a.ID}); !maps.Equal(subs[0].Fields, want) {
		t.Fatalf("by id: fields %v", subs[0].Fields)
	}
	must2(t)(s.Erase(ctx, "f@x.io"))
	if all, _ := s.FieldsOf(ctx, []int64{a.ID}); all[0] != nil {
		t.Fatalf("fields kept after an erasure: %v", all[0])
	}
}
