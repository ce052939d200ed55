package storetest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/newsletter/newsletter/store"
)

// PeopleSeeder is what SeedPeople writes through (*store.Redis).
type PeopleSeeder interface {
	SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error)
	Unsubscribe(ctx context.Context, email string, cancel ...string) (store.Subscriber, error)
	MarkBounced(ctx context.Context, email string) error
}

// SeedAddress is the address of the i-th person SeedPeople adds.
func SeedAddress(i int) string { return fmt.Sprintf("p%07d@bench.example", i) }

// SeedPeople fills s with n people for the benchmarks of the console's
// reads (the store's and the console's measure the same list): 80 %
// active, the rest pending, 1 % unsubscribed, 0.1 % bounced; one in two
// with both topics (digest and updates), the others one of them; each
// named and imported. It goes through the store's own scripts, 2,000 a
// batch, so the counters and bitmaps are the ones a real list has.
func SeedPeople(ctx context.Context, s PeopleSeeder, n int) error {
	const batch = 2000
	topicsOf := [][]string{{"digest", "updates"}, {"digest"}, {"digest", "updates"}, {"updates"}}
	for from := 0; from < n; from += batch {
		reqs := make([]store.SubscribeRequest, 0, batch)
		for i := from; i < min(from+batch, n); i++ {
			reqs = append(reqs, store.SubscribeRequest{Email: SeedAddress(i), Name: "Reader " + strconv.Itoa(i),
				Activate: i%5 != 0, Topics: topicsOf[i%4], Source: store.SourceImport})
		}
		errs, err := s.SubscribeMany(ctx, reqs)
		if err != nil {
			return err
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	for i := 1; i < n; i += 100 {
		if _, err := s.Unsubscribe(ctx, SeedAddress(i)); err != nil {
			return err
		}
	}
	for i := 3; i < n; i += 1000 {
		if err := s.MarkBounced(ctx, SeedAddress(i)); err != nil {
			return err
		}
	}
	return nil
}
