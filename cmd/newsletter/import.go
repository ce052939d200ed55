package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// importBatch is how many rows go to Redis in one pipeline.
const importBatch = 1000

// importColumns are the CSV columns in their order when there is no
// header row; a header row naming them may put them in any order.
const importColumns = "email[,name[,timezone[,topics]]]"

// importCmd is `newsletter import [--pending] FILE.csv`.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pending := fs.Bool("pending", false, "add as pending and send each a confirmation, instead of active")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: newsletter import [--pending] FILE.csv (columns " + importColumns + ")")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read-only: closing cannot lose data
	size := int64(0)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	a, err := newApp(ctx, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	client := a.newClient()

	im := &importer{store: a.store, queue: client, pending: *pending, now: time.Now, topics: a.cfg.Topics}
	counted := &countingReader{r: f}
	var progress *progressBar
	if !*quiet {
		progress = startProgress(stderr, counted, size, &im.rows)
	}
	err = im.run(ctx, counted)
	progress.stop()
	im.summary(stdout)
	// What was added is recorded, also when the file stopped partway.
	detail := fmt.Sprintf("%d added as %s, %d already present, %d invalid", im.added, im.state(), im.present, im.nbad)
	if err != nil {
		detail += "; stopped early"
	}
	a.note(ctx, audit.Imported, "subscribers", detail)
	return err
}

// importer streams rows into the store in batches: memory stays at one
// batch whatever the file's size.
type importer struct {
	store interface {
		SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error)
		OutboxDone(ctx context.Context, ids ...string) error
	}
	queue   tasks.Enqueuer
	pending bool
	now     func() time.Time
	// topics check the topics column (nil: the built-in topics).
	topics *topics.Set

	rows    atomic.Int64
	added   int64
	present int64
	invalid []string // "line N: reason", the first few
	nbad    int64
}

const maxListedInvalid = 20

func (im *importer) run(ctx context.Context, r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	zones := map[string]bool{}
	var reqs []store.SubscribeRequest
	var jobs []tasks.Job
	line := 0
	set := im.topics
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
		req := store.SubscribeRequest{Email: email, Activate: !im.pending, OnlyNew: true}
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
		if im.pending {
			job := tasks.NewConfirm(email, im.now())
			req.Outbox = job.Outbox()
			jobs = append(jobs, job)
		}
		reqs = append(reqs, req)
		if len(reqs) == importBatch {
			if err := im.flush(ctx, reqs, jobs); err != nil {
				return err
			}
			reqs, jobs = reqs[:0], jobs[:0]
		}
	}
	return im.flush(ctx, reqs, jobs)
}

func (im *importer) flush(ctx context.Context, reqs []store.SubscribeRequest, jobs []tasks.Job) error {
	if len(reqs) == 0 {
		return nil
	}
	errs, err := im.store.SubscribeMany(ctx, reqs)
	if err != nil {
		return err
	}
	for i, err := range errs {
		switch {
		case err == nil:
			im.added++
			if im.pending {
				if _, err := tasks.Dispatch(ctx, im.queue, im.store, jobs[i]); err != nil {
					return fmt.Errorf("queue the confirmation of %s (the relay will retry): %w", reqs[i].Email, err)
				}
			}
		case errors.Is(err, store.ErrExists):
			im.present++
		default:
			return fmt.Errorf("add %s: %w", reqs[i].Email, err)
		}
	}
	return nil
}

func (im *importer) bad(line int, reason string) {
	im.nbad++
	if len(im.invalid) < maxListedInvalid {
		im.invalid = append(im.invalid, fmt.Sprintf("line %d: %s", line, reason))
	}
}

func (im *importer) summary(w io.Writer) {
	fmt.Fprintf(w, "imported: %d added as %s, %d already present, %d invalid\n", im.added, im.state(), im.present, im.nbad)
	for _, l := range im.invalid {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if im.nbad > int64(len(im.invalid)) {
		fmt.Fprintf(w, "  … and %d more invalid rows\n", im.nbad-int64(len(im.invalid)))
	}
}

// state is what the imported subscribers became.
func (im *importer) state() string {
	if im.pending {
		return "pending (confirmations queued)"
	}
	return "active"
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// progressBar redraws one line on w until stopped.
type progressBar struct {
	done chan struct{}
	wg   chan struct{}
}

func startProgress(w io.Writer, r *countingReader, size int64, rows *atomic.Int64) *progressBar {
	p := &progressBar{done: make(chan struct{}), wg: make(chan struct{})}
	start := time.Now()
	draw := func() {
		frac := 0.0
		if size > 0 {
			frac = float64(r.n.Load()) / float64(size)
		}
		n := int(frac * 30)
		rate := float64(rows.Load()) / max(time.Since(start).Seconds(), 0.001)
		fmt.Fprintf(w, "\r[%s%s] %3.0f%%  %d rows  %.0f rows/s ", strings.Repeat("#", n), strings.Repeat(" ", 30-n), frac*100, rows.Load(), rate)
	}
	go func() {
		defer close(p.wg)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				draw()
				fmt.Fprintln(w)
				return
			case <-t.C:
				draw()
			}
		}
	}()
	return p
}

func (p *progressBar) stop() {
	if p != nil {
		close(p.done)
		<-p.wg
	}
}
