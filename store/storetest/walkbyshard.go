package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// testAudienceByShard: the planner's walk shard by shard gives every
// active reader of the topics once, in walk-key order, at any page size;
// each shard's readers come in one run, so the pages of a dense list
// touch one or two shards each.
func testAudienceByShard(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	seeder, ok := s.(PeopleSeeder)
	if !ok {
		t.Skip("this store has no bulk path")
	}
	must(t, SeedPeople(ctx, seeder, 4000))
	byID := func(topic string) []int64 {
		var all []int64
		for cursor := int64(0); ; {
			page, err := s.AudienceAfter(ctx, topic, cursor, 500)
			must(t, err)
			if len(page) == 0 {
				return all
			}
			all = append(all, page...)
			cursor = page[len(page)-1]
		}
	}
	union := append(byID("digest"), byID("updates")...)
	slices.Sort(union)
	union = slices.Compact(union)
	for _, c := range []struct {
		topics []string
		want   []int64
	}{
		{[]string{"digest"}, byID("digest")},
		{[]string{"digest", "updates"}, union},
		{[]string{""}, byID("")},
		{nil, nil},
	} {
		for _, size := range []int{1, 37, 100, 1000} {
			var got []int64
			pages, touched := 0, 0
			for cursor := int64(0); ; {
				page, err := s.AudienceByShard(ctx, c.topics, cursor, size)
				must(t, err)
				if len(page) > size {
					t.Fatalf("%v: a page of %d for a limit of %d", c.topics, len(page), size)
				}
				if len(page) == 0 {
					break
				}
				got = append(got, page...)
				cursor = store.WalkKey(page[len(page)-1])
				pages++
				shards := map[int64]bool{}
				for _, id := range page {
					shards[id%store.Shards] = true
				}
				touched += len(shards)
			}
			if !slices.IsSortedFunc(got, func(a, b int64) int { return int(store.WalkKey(a) - store.WalkKey(b)) }) {
				t.Fatalf("%v in pages of %d: not in walk-key order", c.topics, size)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("%v in pages of %d: walked %d readers, want the %d of the walk by id", c.topics, size, len(got), len(c.want))
			}
			// Every shard's readers in one run: a shard is touched by
			// one more page only where a page ends inside it.
			if touched > pages+store.Shards-1 {
				t.Fatalf("%v in pages of %d: %d pages touched %d shards, more than one run a shard", c.topics, size, pages, touched)
			}
		}
	}
}
