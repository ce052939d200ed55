package console

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/csvimport"
)

// An import's progress lives in Redis, so whichever API replica answers
// the progress page reads it: a hash of the fields below, kept a week.
const (
	prefixImport = "nl:console:import:" // + job id
	importKeep   = 7 * 24 * time.Hour
	// importTick is how often a running import writes its progress.
	importTick = 250 * time.Millisecond
)

// Import states.
const (
	importRunning = "running"
	importDone    = "done"
	importFailed  = "failed"
)

// importStatus is one import as its page shows it.
type importStatus struct {
	ID       string   `json:"id"`
	State    string   `json:"state"`
	File     string   `json:"file"`
	Size     int64    `json:"size"`
	Read     int64    `json:"read"`
	Pending  bool     `json:"pending"`
	Rows     int64    `json:"rows"`
	Added    int64    `json:"added"`
	Present  int64    `json:"present"`
	Rejected int64    `json:"rejected"`
	Reasons  []string `json:"reasons"`
	Error    string   `json:"error,omitempty"`
	By       string   `json:"by"`
}

// Percent is how much of the file was read, 0 to 100.
func (s importStatus) Percent() int64 {
	if s.State == importDone {
		return 100
	}
	if s.Size <= 0 {
		return 0
	}
	return min(100, 100*s.Read/s.Size)
}

// MoreRejected tells whether more lines were rejected than are listed.
func (s importStatus) MoreRejected() bool { return s.Rejected > int64(len(s.Reasons)) }

type imports struct {
	rdb redis.UniversalClient
	log *slog.Logger
	// tick is how often a running import saves its progress (0:
	// importTick); a test makes it short to overlap the import's end.
	tick time.Duration
	// wg holds the running imports, so a test (or a shutdown) can wait
	// for them.
	wg sync.WaitGroup
}

var errNoImport = errors.New("no such import")

func newImportID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func (im *imports) save(ctx context.Context, s importStatus) error {
	reasons, err := json.Marshal(s.Reasons)
	if err != nil {
		return err
	}
	key := prefixImport + s.ID
	_, err = im.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "state", s.State, "file", s.File, "size", s.Size, "read", s.Read, "pending", strconv.FormatBool(s.Pending),
			"rows", s.Rows, "added", s.Added, "present", s.Present, "rejected", s.Rejected, "reasons", string(reasons), "error", s.Error, "by", s.By)
		p.Expire(ctx, key, importKeep)
		return nil
	})
	return err
}

func (im *imports) load(ctx context.Context, id string) (importStatus, error) {
	m, err := im.rdb.HGetAll(ctx, prefixImport+id).Result()
	if err != nil {
		return importStatus{}, err
	}
	if len(m) == 0 {
		return importStatus{}, errNoImport
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
	s := importStatus{ID: id, State: m["state"], File: m["file"], Size: n("size"), Read: n("read"), Pending: m["pending"] == "true",
		Rows: n("rows"), Added: n("added"), Present: n("present"), Rejected: n("rejected"), Error: m["error"], By: m["by"]}
	if err := json.Unmarshal([]byte(m["reasons"]), &s.Reasons); err != nil {
		s.Reasons = nil
	}
	return s, nil
}

// start runs the import of data in the background and returns at once;
// done is called with the final status (the audit entry).
func (im *imports) start(s importStatus, data []byte, importer *csvimport.Importer, done func(importStatus)) error {
	ctx := context.Background()
	if err := im.save(ctx, s); err != nil {
		return err
	}
	im.wg.Add(1)
	go func() {
		defer im.wg.Done()
		counted := &csvimport.CountingReader{R: bytes.NewReader(data)}
		// snapshot copies s with the progress so far: the ticker and this
		// goroutine both take one, so neither may write s itself.
		snapshot := func() importStatus {
			c, res := s, importer.Progress()
			c.Read, c.Rows, c.Added, c.Present, c.Rejected, c.Reasons = counted.N(), res.Rows, res.Added, res.Present, res.Rejected, res.Reasons
			return c
		}
		finished, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(cmp.Or(im.tick, importTick))
			defer t.Stop()
			for {
				select {
				case <-finished:
					return
				case <-t.C:
					if err := im.save(ctx, snapshot()); err != nil {
						im.log.Warn("console: import progress not saved", "import", s.ID, "err", err)
					}
				}
			}
		}()
		err := importer.Run(ctx, counted)
		// The ticker stops before the final state is taken, so a tick in
		// flight cannot save "running" over "done".
		close(finished)
		<-stopped
		s = snapshot()
		s.State = importDone
		if err != nil {
			s.State, s.Error = importFailed, err.Error()
			im.log.Error("console: import stopped", "import", s.ID, "err", err)
		}
		// The final state must land: a page left "running" forever would
		// lie. Retry a few times while Redis comes back.
		for attempt := 0; ; attempt++ {
			err := im.save(ctx, s)
			if err == nil || attempt == 20 {
				if err != nil {
					im.log.Error("console: import's final state not saved", "import", s.ID, "err", err)
				}
				break
			}
			time.Sleep(time.Second)
		}
		done(s)
	}()
	return nil
}

// Wait blocks until every import started has ended (tests, shutdown).
func (h *Handler) Wait() { h.imports.wg.Wait() }
