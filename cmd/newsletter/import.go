package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/csvimport"
)

// importColumns are the CSV columns (the help names them).
const importColumns = csvimport.Columns

// importCmd is `newsletter import [--pending] FILE.csv`.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pending := fs.Bool("pending", false, "add as pending and send each a confirmation, instead of active")
	quiet := fs.Bool("quiet", false, "no progress bar")
	generic := fs.Bool("generic", false, "read the header row by our own column names, not as a service's export")
	var maps mapFlags
	fs.Var(&maps, "map", "COLUMN=FIELD: map the header's COLUMN to FIELD ("+strings.Join(csvimport.Targets, ", ")+", field.NAME, or nothing to leave it out); repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: newsletter import [--pending] [--generic] [--map COLUMN=FIELD]... FILE.csv (columns " + importColumns + ", or a service's export)")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read-only: closing cannot lose data
	mapping, err := importMapping(f, *generic, maps)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Fprint(stdout, mapping)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", fs.Arg(0), err)
	}
	// The lines are counted first, apart from the import's reading: the
	// import must account for each of them.
	lines, err := csvimport.CountLines(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", fs.Arg(0), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", fs.Arg(0), err)
	}
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

	// The stored topics, as the service's roles read them.
	im := &csvimport.Importer{Store: a.store, Queue: client, Pending: *pending, Now: time.Now, Topics: a.catalog, Mapping: &mapping}
	counted := &csvimport.CountingReader{R: f}
	var progress *progressBar
	if !*quiet {
		progress = startProgress(stderr, counted, size, im)
	}
	res, err := im.Run(ctx, counted, lines, csvimport.Progress{})
	progress.stop()
	res.WriteSummary(stdout, lines, *pending)
	// What was added is recorded, also when the file stopped partway.
	detail := res.Detail(*pending)
	if err != nil {
		detail += "; stopped early: " + err.Error()
	}
	a.note(ctx, audit.Imported, "subscribers", detail)
	return err
}

// progressBar redraws one line on w until stopped.
type progressBar struct {
	done chan struct{}
	wg   chan struct{}
}

func startProgress(w io.Writer, r *csvimport.CountingReader, size int64, im *csvimport.Importer) *progressBar {
	p := &progressBar{done: make(chan struct{}), wg: make(chan struct{})}
	start := time.Now()
	draw := func() {
		frac := 0.0
		if size > 0 {
			frac = float64(r.N()) / float64(size)
		}
		n := int(frac * 30)
		rows := im.Progress().Read
		rate := float64(rows) / max(time.Since(start).Seconds(), 0.001)
		fmt.Fprintf(w, "\r[%s%s] %3.0f%%  %d rows  %.0f rows/s ", strings.Repeat("#", n), strings.Repeat(" ", 30-n), frac*100, rows, rate)
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

// mapFlags are the --map COLUMN=FIELD flags, in their order.
type mapFlags []string

func (m *mapFlags) String() string { return strings.Join(*m, " ") }

func (m *mapFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return errors.New("want COLUMN=FIELD")
	}
	*m = append(*m, v)
	return nil
}

// importMapping reads the file's header row: the service recognised and
// its mapping, read as ours when generic, with the --map overrides; an
// error when no column is the address.
func importMapping(r io.Reader, generic bool, maps mapFlags) (csvimport.Mapping, error) {
	head, err := csvimport.Preview(r, 1)
	m, rows := head.Mapping, head.Rows
	if err != nil {
		return m, err
	}
	switch {
	case generic && m.Header:
		m = csvimport.RecogniseAs(csvimport.SourceGeneric, m.Names)
	case len(maps) > 0 && !m.Header && len(rows) > 0:
		// Line 1 names no address column, and the flags say which it is.
		m = csvimport.RecogniseAs(csvimport.SourceGeneric, rows[0])
	}
	for _, kv := range maps {
		col, to, _ := strings.Cut(kv, "=")
		if !m.Header {
			return m, errors.New("--map needs a header row naming the columns")
		}
		if err := m.Set(col, strings.TrimSpace(to)); err != nil {
			return m, err
		}
	}
	return m, m.Check()
}
