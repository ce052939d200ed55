package csvimport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Batch is how many rows go to Redis in one pipeline, and how many lines
// at most pass between two checkpoints.
const Batch = 1000

// Columns are the CSV columns in their order when there is no header
// row; a header row naming them may put them in any order.
// Beside them a header row may name the columns tags (the person's
// tags, separated by ;) and field.NAME (a value of the declared custom
// field NAME).
const Columns = "email[,name[,timezone[,topics]]]"

// FieldDeclarations is the part of a store that keeps the declared custom
// fields: an import of field.NAME columns checks each value against its
// declaration (a store without it rejects every value).
type FieldDeclarations interface {
	FieldDefs(ctx context.Context) ([]store.FieldDef, error)
}

// MaxListedRejects is how many rejected lines an import names with their
// reasons; the rest are only counted (Progress.RejectedMore).
const MaxListedRejects = 1000

// MaxLine is the longest line read: a longer one is rejected whole (a
// file that is not a list of addresses, or a lost line break).
const MaxLine = 64 << 10

// ErrIncomplete is wrapped by the error of an import whose reading did not
// account for every line of the file: it never ends as done.
var ErrIncomplete = errors.New("the import did not account for every line of the file")

// Store is what an import needs of the store.
type Store interface {
	SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error)
	OutboxDone(ctx context.Context, ids ...string) error
}

// Rejection is one line that added nobody, and why.
type Rejection struct {
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

// Progress is where an import stands, and its checkpoint: every line up to
// Line has its verdict in the counts. Line counts the header row and blank
// lines too; at a checkpoint and at the end
//
//	Line = Header + Blank + Read
//	Read = Added + Present + Erased + len(Rejected) + RejectedMore
type Progress struct {
	Line   int64 `json:"lines_done"`
	Header int64 `json:"header"` // 1 when line 1 named the columns
	Blank  int64 `json:"blank"`  // empty lines, skipped
	// Read are the rows of subscribers, valid or not.
	Read    int64 `json:"read"`
	Added   int64 `json:"added"`
	Present int64 `json:"present"`
	// Erased were skipped: erased at the person's request
	// (store.ErrErased); counted, never named.
	Erased int64 `json:"erased"`
	// Rejected are the first MaxListedRejects rejected lines (never nil);
	// RejectedMore counts the others.
	Rejected     []Rejection `json:"rejected"`
	RejectedMore int64       `json:"rejected_more"`
}

// RejectedTotal is how many lines were rejected, listed or not.
func (p Progress) RejectedTotal() int64 { return int64(len(p.Rejected)) + p.RejectedMore }

// check is the accounting every checkpoint and end must satisfy.
func (p Progress) check() error {
	if p.Line != p.Header+p.Blank+p.Read || p.Read != p.Added+p.Present+p.Erased+p.RejectedTotal() {
		return fmt.Errorf("%w: %d lines, %d header, %d blank, %d read; %d added, %d present, %d erased, %d rejected",
			ErrIncomplete, p.Line, p.Header, p.Blank, p.Read, p.Added, p.Present, p.Erased, p.RejectedTotal())
	}
	return nil
}

func (p Progress) clone() Progress {
	p.Rejected = slices.Clone(p.Rejected)
	if p.Rejected == nil {
		p.Rejected = []Rejection{}
	}
	return p
}

// Detail is the import's counts in one line (the audit entry's detail).
func (p Progress) Detail(pending bool) string {
	return fmt.Sprintf("%d rows read: %d added as %s, %d already present, %d erased skipped, %d rejected",
		p.Read, p.Added, state(pending), p.Present, p.Erased, p.RejectedTotal())
}

func state(pending bool) string {
	if pending {
		return "pending"
	}
	return "active"
}

// WriteSummary prints what an import did: the counts, the file's lines,
// and the rejected lines with their reasons (the command's output; the
// console's page shows the same).
func (p Progress) WriteSummary(w io.Writer, lines int64, pending bool) {
	st := "active"
	if pending {
		st = "pending (confirmations queued)"
	}
	fmt.Fprintf(w, "imported: %d added as %s, %d already present, %d invalid\n", p.Added, st, p.Present, p.RejectedTotal())
	fmt.Fprintf(w, "  %d rows read of %d lines (%d header, %d blank)\n", p.Read, lines, p.Header, p.Blank)
	if p.Erased > 0 {
		fmt.Fprintf(w, "  %d skipped: erased at the person's request (only their own signup brings them back)\n", p.Erased)
	}
	for _, r := range p.Rejected {
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	if p.RejectedMore > 0 {
		fmt.Fprintf(w, "  … and %d more invalid rows\n", p.RejectedMore)
	}
}

// Importer streams rows into the store. Its Progress may be read while
// Run goes on (a progress bar).
type Importer struct {
	Store Store
	Queue tasks.Enqueuer
	// Pending adds people as pending and queues each a confirmation,
	// instead of active.
	Pending bool
	Now     func() time.Time
	// Topics check the topics column (nil: the built-in topics).
	Topics topics.Source
	// Batch is how many rows go to the store at once, and at most how
	// many lines pass between checkpoints (0: Batch).
	Batch int
	// Mapping, when set, says what each column is (the console's mapping
	// step, the command's --map); nil recognises it from the header row
	// (Recognise).
	Mapping *Mapping
	// Checkpoint, when set, is called after each batch is stored, with
	// every line so far accounted for; its error stops the run. A run
	// started again from the last checkpoint goes on from there.
	Checkpoint func(ctx context.Context, p Progress) error

	mu  sync.Mutex
	now Progress
}

// Progress is the import's counters now.
func (im *Importer) Progress() Progress {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.now.clone()
}

func (im *Importer) update(p *Progress) {
	im.mu.Lock()
	im.now = p.clone()
	im.mu.Unlock()
}

// CountLines counts the lines of r as Run reads them: every line break
// ends one, and text after the last one is a line too.
func CountLines(r io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	last := byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// Run reads r, a file of lines lines (CountLines), from the checkpoint
// from (the zero Progress: from the start), and returns the final counts.
//
// Each line is one record: the lines are split first, then each is
// parsed as CSV on its own. No column may hold a line break (addresses,
// names, zones and topics are one line), so a quote that does not close on
// its line rejects that line ("unbalanced quote") and the next line is
// read as a new record: one broken quote costs its own line, never the
// rest of the file. A line longer than MaxLine is rejected whole; an
// empty line is skipped and counted as blank.
//
// An error is a file that cannot be read, a store that failed, or an
// ErrIncomplete: the file's line count does not match the lines read.
// The rows before it are stored.
func (im *Importer) Run(ctx context.Context, r io.Reader, lines int64, from Progress) (Progress, error) {
	ir := im.newRun(from)
	if fd, ok := im.Store.(FieldDeclarations); ok {
		defs, err := fd.FieldDefs(ctx)
		if err != nil {
			return ir.p, fmt.Errorf("read the declared fields: %w", err)
		}
		for _, d := range defs {
			ir.fields[d.Name] = d
		}
	}
	lr := newLineReader(r)
	var line int64
	for {
		text, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ir.p, fmt.Errorf("read line %d: %w", line+1, err)
		}
		line++
		if err := ir.take(ctx, line, text, tooLong); err != nil {
			return ir.p, err
		}
	}
	if err := ir.flush(ctx); err != nil {
		return ir.p, err
	}
	if ir.p.Line != lines {
		return ir.p, fmt.Errorf("%w: the file has %d lines, %d were read", ErrIncomplete, lines, ir.p.Line)
	}
	return ir.p, nil
}

// importRun is one Run: the counters, the columns and the batch not yet
// stored.
type importRun struct {
	im    *Importer
	now   func() time.Time
	set   *topics.Set
	batch int
	p     Progress
	zones map[string]bool
	// fields are the declared custom fields, by name.
	fields map[string]store.FieldDef
	// mapping is what each column is; col its columns by our field.
	mapping  Mapping
	col      map[string]int
	reqs     []store.SubscribeRequest
	reqLines []int64
	jobs     []tasks.Job
	// sinceCheckpoint is the lines read since the last checkpoint.
	sinceCheckpoint int
}

func (im *Importer) newRun(from Progress) *importRun {
	ir := &importRun{im: im, now: im.Now, set: topics.Of(im.Topics), batch: im.Batch, p: from.clone(), zones: map[string]bool{}, fields: map[string]store.FieldDef{},
		col: map[string]int{}}
	ir.setMapping(positional())
	if im.Mapping != nil {
		ir.setMapping(*im.Mapping)
	}
	if ir.now == nil {
		ir.now = time.Now
	}
	if ir.set == nil {
		ir.set = topics.Default(0)
	}
	if ir.batch <= 0 {
		ir.batch = Batch
	}
	im.update(&ir.p)
	return ir
}

// take reads line number line, stores the batch when it is full.
func (ir *importRun) take(ctx context.Context, line int64, text []byte, tooLong bool) error {
	if line == 1 {
		text = bytes.TrimPrefix(text, []byte("\ufeff")) // a spreadsheet's byte order mark
	}
	var rec []string
	reason := ""
	switch {
	case tooLong:
		reason = fmt.Sprintf("line longer than %d KiB", MaxLine>>10)
	case len(bytes.TrimSpace(text)) == 0:
	default:
		rec, reason = parseLine(text)
	}
	// The header row is read again on a resume: the columns come from it.
	if line == 1 && ir.header(rec, reason) {
		if line > ir.p.Line {
			ir.p.Header, ir.p.Line = 1, line
		}
		return nil
	}
	if line <= ir.p.Line {
		return nil // accounted for before the checkpoint
	}
	ir.p.Line = line
	ir.sinceCheckpoint++
	switch {
	case !tooLong && rec == nil && reason == "":
		ir.p.Blank++
	case reason != "":
		ir.p.Read++
		ir.reject(line, reason)
	default:
		ir.p.Read++
		ir.add(line, rec)
	}
	if len(ir.reqs) == ir.batch || ir.sinceCheckpoint >= ir.batch {
		return ir.flush(ctx)
	}
	ir.im.update(&ir.p)
	return nil
}

func (ir *importRun) reject(line int64, reason string) {
	if len(ir.p.Rejected) < MaxListedRejects {
		ir.p.Rejected = append(ir.p.Rejected, Rejection{Line: line, Reason: reason})
	} else {
		ir.p.RejectedMore++
	}
}

// flush stores the batch and saves the checkpoint: after it, every line
// up to p.Line is accounted for.
func (ir *importRun) flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ir.im.flush(ctx, &ir.p, ir.reqs, ir.reqLines, ir.jobs); err != nil {
		return err
	}
	ir.reqs, ir.reqLines, ir.jobs = ir.reqs[:0], ir.reqLines[:0], ir.jobs[:0]
	ir.sinceCheckpoint = 0
	ir.im.update(&ir.p)
	if err := ir.p.check(); err != nil {
		return err
	}
	if ir.im.Checkpoint != nil {
		return ir.im.Checkpoint(ctx, ir.p.clone())
	}
	return nil
}

// parseLine reads one line as one CSV record, or says why it cannot.
func parseLine(text []byte) ([]string, string) {
	cr := csv.NewReader(bytes.NewReader(text))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	rec, err := cr.Read()
	if err == nil {
		if _, err = cr.Read(); err == io.EOF {
			return rec, ""
		}
		// A lone carriage return inside the line made two records.
		return nil, "more than one record on the line (a stray carriage return?)"
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrQuote) && unbalanced(text) {
		return nil, `unbalanced quote: a quoted field does not close on its line (no field may hold a line break)`
	}
	if errors.As(err, &pe) {
		return nil, pe.Err.Error()
	}
	return nil, err.Error()
}

// unbalanced tells whether text ends inside a quoted field.
func unbalanced(text []byte) bool {
	return bytes.Count(text, []byte{'"'})%2 == 1
}

func (im *Importer) flush(ctx context.Context, p *Progress, reqs []store.SubscribeRequest, lines []int64, jobs []tasks.Job) error {
	if len(reqs) == 0 {
		return nil
	}
	// A slow or restarting Redis is waited out (redisconn.DefaultWait), the
	// batch sent again if need be: the store counts a batch that reached
	// it twice once (its subscribe script knows its own write), so a busy
	// Redis neither stops the import nor skews its counts.
	errs, err := im.Store.SubscribeMany(redisconn.WaitOut(ctx, redisconn.Wait{Resend: true}), reqs)
	if err != nil {
		return err
	}
	for i, err := range errs {
		switch {
		case err == nil:
			p.Added++
			if im.Pending {
				if _, err := tasks.Dispatch(ctx, im.Queue, im.Store, jobs[i]); err != nil {
					return fmt.Errorf("queue the confirmation of %s (the relay will retry): %w", reqs[i].Email, err)
				}
			}
		case errors.Is(err, store.ErrExists):
			p.Present++
		case errors.Is(err, store.ErrErased):
			// Erased at the person's request: an import must not bring
			// them back (only their own signup does). Counted, never named.
			p.Erased++
		default:
			return fmt.Errorf("add line %d: %w", lines[i], err)
		}
	}
	return nil
}

// lineReader reads physical lines: a line break ends each (a CR before it
// is dropped), and text after the last one is a line too.
type lineReader struct {
	br *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, MaxLine)}
}

// next is the next line without its line break (valid until the next
// call); tooLong when it exceeded MaxLine (its text is dropped).
func (lr *lineReader) next() (text []byte, tooLong bool, err error) {
	text, err = lr.br.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		tooLong = true
		_, err = lr.br.ReadSlice('\n')
	}
	if err == io.EOF && (len(text) > 0 || tooLong) {
		err = nil // the last line has no line break
	}
	if err != nil {
		return nil, false, err
	}
	if tooLong {
		return nil, true, nil
	}
	text = bytes.TrimSuffix(text, []byte{'\n'})
	return bytes.TrimSuffix(text, []byte{'\r'}), false, nil
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
