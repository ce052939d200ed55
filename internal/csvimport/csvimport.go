package csvimport

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Batch is how many rows go to Redis in one pipeline.
const Batch = 1000

// Columns are the CSV columns in their order when there is no header
// row; a header row naming them may put them in any order.
const Columns = "email[,name[,timezone[,topics]]]"

// MaxListedRejects is how many rejected rows a Result names; the rest
// are only counted.
const MaxListedRejects = 20

// Store is what an import needs of the store.
type Store interface {
	SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error)
	OutboxDone(ctx context.Context, ids ...string) error
}

// Importer streams rows into the store. Its counters may be read while
// Run goes on (a progress bar, the console's progress page).
type Importer struct {
	Store Store
	Queue tasks.Enqueuer
	// Pending adds people as pending and queues each a confirmation,
	// instead of active.
	Pending bool
	Now     func() time.Time
	// Topics check the topics column (nil: the built-in topics).
	Topics *topics.Set

	rows    atomic.Int64
	added   atomic.Int64
	present atomic.Int64
	erased  atomic.Int64 // skipped: erased at the person's request
	nbad    atomic.Int64

	mu       sync.Mutex
	rejected []string // "line N: reason", the first MaxListedRejects
}

// Result is where an import stands: rows read (the header row is not
// one), added, already present, erased (skipped: erased at the person's
// request, store.ErrErased), rejected, and the first rejected rows with
// their reasons.
type Result struct {
	Rows, Added, Present, Erased, Rejected int64
	Reasons                                []string
}

// Progress is the import's counters now.
func (im *Importer) Progress() Result {
	im.mu.Lock()
	reasons := slices.Clone(im.rejected)
	im.mu.Unlock()
	return Result{Rows: im.rows.Load(), Added: im.added.Load(), Present: im.present.Load(), Erased: im.erased.Load(), Rejected: im.nbad.Load(), Reasons: reasons}
}

// Run reads r to its end. An error is a file that cannot be read or a
// store that failed: the rows before it are stored, the rest are not.
func (im *Importer) Run(ctx context.Context, r io.Reader) error {
	now := im.Now
	if now == nil {
		now = time.Now
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	zones := map[string]bool{}
	var reqs []store.SubscribeRequest
	var jobs []tasks.Job
	line := 0
	set := im.Topics
	if set == nil {
		set = topics.Default(0)
	}
	// The columns by position, or by the header row's names.
	col := map[string]int{"email": 0, "name": 1, "timezone": 2, "topics": 3}
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				im.rows.Add(1)
				im.bad(line, pe.Err.Error())
				continue
			}
			return fmt.Errorf("read line %d: %w", line, err)
		}
		if line == 1 && slices.ContainsFunc(rec, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), "email") }) {
			col = map[string]int{}
			for i, h := range rec {
				col[strings.ToLower(strings.TrimSpace(h))] = i
			}
			continue // the header row: no subscriber, not counted
		}
		im.rows.Add(1) // the progress counts rows of subscribers, valid or not
		email, err := address.Normalize(field(rec, "email"))
		if err != nil {
			im.bad(line, "invalid address")
			continue
		}
		req := store.SubscribeRequest{Email: email, Activate: !im.Pending, OnlyNew: true, Source: store.SourceImport}
		if req.Name, err = address.CheckName(field(rec, "name")); err != nil {
			im.bad(line, err.Error())
			continue
		}
		// Topics: ids separated by spaces, semicolons or (in a quoted
		// field) commas; none gives the default topics.
		if ids := strings.FieldsFunc(field(rec, "topics"), func(r rune) bool { return r == ' ' || r == ';' || r == ',' || r == '|' }); len(ids) > 0 {
			if req.Topics, err = set.Check(ids); err != nil {
				im.bad(line, err.Error())
				continue
			}
		} else if req.Topics = set.Defaults(); len(req.Topics) == 0 {
			im.bad(line, "no topics, and none is on by default in the topics file")
			continue
		}
		if tz := field(rec, "timezone"); tz != "" {
			req.Timezone = tz
			ok, seen := zones[req.Timezone]
			if !seen {
				_, err := time.LoadLocation(req.Timezone)
				ok = err == nil && !strings.ContainsAny(req.Timezone, "\r\n")
				zones[req.Timezone] = ok
			}
			if !ok {
				im.bad(line, "unknown time zone "+req.Timezone)
				continue
			}
		}
		if im.Pending {
			job := tasks.NewConfirm(email, now())
			req.Outbox = job.Outbox()
			jobs = append(jobs, job)
		}
		reqs = append(reqs, req)
		if len(reqs) == Batch {
			if err := im.flush(ctx, reqs, jobs); err != nil {
				return err
			}
			reqs, jobs = reqs[:0], jobs[:0]
		}
	}
	return im.flush(ctx, reqs, jobs)
}

func (im *Importer) flush(ctx context.Context, reqs []store.SubscribeRequest, jobs []tasks.Job) error {
	if len(reqs) == 0 {
		return nil
	}
	errs, err := im.Store.SubscribeMany(ctx, reqs)
	if err != nil {
		return err
	}
	for i, err := range errs {
		switch {
		case err == nil:
			im.added.Add(1)
			if im.Pending {
				if _, err := tasks.Dispatch(ctx, im.Queue, im.Store, jobs[i]); err != nil {
					return fmt.Errorf("queue the confirmation of %s (the relay will retry): %w", reqs[i].Email, err)
				}
			}
		case errors.Is(err, store.ErrExists):
			im.present.Add(1)
		case errors.Is(err, store.ErrErased):
			// Erased at the person's request: an import must not bring
			// them back (only their own signup does). Counted, never named.
			im.erased.Add(1)
		default:
			return fmt.Errorf("add %s: %w", reqs[i].Email, err)
		}
	}
	return nil
}

func (im *Importer) bad(line int, reason string) {
	im.nbad.Add(1)
	im.mu.Lock()
	defer im.mu.Unlock()
	if len(im.rejected) < MaxListedRejects {
		im.rejected = append(im.rejected, fmt.Sprintf("line %d: %s", line, reason))
	}
}

// CountingReader counts the bytes read through it (a progress bar's
// share of the file).
type CountingReader struct {
	R io.Reader
	n atomic.Int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// N is how many bytes were read so far.
func (c *CountingReader) N() int64 { return c.n.Load() }
