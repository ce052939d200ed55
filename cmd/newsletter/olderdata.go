package main

import (
	"context"
	"fmt"

	"github.com/newsletter/newsletter/store"
)

// refuseOlderDigestRuns stops every role and tool at start-up while the
// data holds a digest run an earlier version began and has not finished:
// that run goes out as email:digest batches, which this version no longer
// sends, so starting would leave the rest of the run's readers without
// their week. The one line says the way out.
func refuseOlderDigestRuns(ctx context.Context, st *store.Redis) error {
	periods, err := st.OlderDigestRuns(ctx)
	if err != nil {
		return fmt.Errorf("redis layout: %w", err)
	}
	if len(periods) == 0 {
		return nil
	}
	p := periods[0]
	return fmt.Errorf("digest run %s was begun by an earlier version and is still sending: let the previous release finish it (progress: GET /api/digests/%s), then start this one", p, p)
}
