package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/csvimport"
	"github.com/newsletter/newsletter/internal/redistest"
	"github.com/newsletter/newsletter/store"
)

// nullStore takes every row and touches no shared state, so nothing but
// the import's own code orders its goroutines.
type nullStore struct{}

func (nullStore) SubscribeMany(_ context.Context, reqs []store.SubscribeRequest) ([]error, error) {
	return make([]error, len(reqs)), nil
}

func (nullStore) OutboxDone(context.Context, ...string) error { return nil }

// The progress ticker and the import's end take their snapshots without
// sharing a variable (under -race, a tick every millisecond overlaps the
// end), and the final state is the one kept: a tick in flight never saves
// "running" over "done".
func TestImportTickerAndEndDoNotRace(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBConsole)
	im := &imports{rdb: rdb, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tick: time.Millisecond}
	var csv strings.Builder
	csv.WriteString("email\n")
	const rows = 5000
	for i := range rows {
		fmt.Fprintf(&csv, "r%d@example.com\n", i)
	}
	for run := range 5 {
		s := importStatus{ID: fmt.Sprintf("race-%d", run), State: importRunning, File: "list.csv"}
		var final importStatus
		if err := im.start(s, []byte(csv.String()), &csvimport.Importer{Store: nullStore{}}, func(got importStatus) { final = got }); err != nil {
			t.Fatal(err)
		}
		im.wg.Wait()
		if final.State != importDone || final.Rows != rows {
			t.Fatalf("final status %+v, want done with %d rows", final, rows)
		}
		saved, err := im.load(context.Background(), s.ID)
		if err != nil || saved.State != importDone || saved.Rows != rows {
			t.Fatalf("saved status %+v %v, want done with %d rows", saved, err, rows)
		}
	}
}
