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
	"github.com/newsletter/newsletter/internal/csvimport"
)

// importColumns are the CSV columns (the help names them).
const importColumns = csvimport.Columns

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

	im := &csvimport.Importer{Store: a.store, Queue: client, Pending: *pending, Now: time.Now, Topics: a.cfg.Topics}
	counted := &csvimport.CountingReader{R: f}
	var progress *progressBar
	if !*quiet {
		progress = startProgress(stderr, counted, size, im)
	}
	err = im.Run(ctx, counted)
	progress.stop()
	res := im.Progress()
	summary(stdout, res, *pending)
	// What was added is recorded, also when the file stopped partway.
	detail := fmt.Sprintf("%d added as %s, %d already present, %d invalid", res.Added, importState(*pending), res.Present, res.Rejected)
	if err != nil {
		detail += "; stopped early"
	}
	a.note(ctx, audit.Imported, "subscribers", detail)
	return err
}

// importState names what an import makes of the rows it adds.
func importState(pending bool) string {
	if pending {
		return "pending"
	}
	return "active"
}

// summary prints what an import did and the first rejected rows.
func summary(w io.Writer, res csvimport.Result, pending bool) {
	state := "active"
	if pending {
		state = "pending (confirmations queued)"
	}
	fmt.Fprintf(w, "imported: %d added as %s, %d already present, %d invalid\n", res.Added, state, res.Present, res.Rejected)
	if res.Erased > 0 {
		fmt.Fprintf(w, "  %d skipped: erased at the person's request (only their own signup brings them back)\n", res.Erased)
	}
	for _, l := range res.Reasons {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if res.Rejected > int64(len(res.Reasons)) {
		fmt.Fprintf(w, "  … and %d more invalid rows\n", res.Rejected-int64(len(res.Reasons)))
	}
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
		rows := im.Progress().Rows
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
