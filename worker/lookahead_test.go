package worker

import (
	"slices"
	"testing"
)

// A lookahead hands out the pages a read at each cursor would give, from
// one read per ten pages, and ends where the walk ends.
func TestLookaheadPages(t *testing.T) {
	var all []int64
	for i := int64(1); i <= 2345; i++ {
		if i%3 != 0 {
			all = append(all, i*7)
		}
	}
	reads := 0
	read := func(cursor int64, limit int) ([]int64, error) {
		reads++
		i, _ := slices.BinarySearch(all, cursor+1)
		return all[i:min(len(all), i+limit)], nil
	}
	l := lookahead{page: 100, read: read}
	var got []int64
	var cursor int64
	for {
		page, err := l.next(cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		want, _ := read(cursor, 100)
		reads--
		if !slices.Equal(page, want) {
			t.Fatalf("the page after %d: %v, want %v", cursor, page, want)
		}
		got = append(got, page...)
		cursor = page[len(page)-1]
	}
	if !slices.Equal(got, all) {
		t.Fatalf("walked %d ids, want %d", len(got), len(all))
	}
	if pages := (len(all) + 99) / 100; reads > pages/LookaheadPages+2 {
		t.Fatalf("%d reads for %d pages", reads, pages)
	}
}
