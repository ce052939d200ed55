package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportAndPlot: the report says FAIL and marks the breached row;
// the plot is a PNG that decodes.
func TestReportAndPlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c := &chaos{faults: []fault{{name: "kill -9 worker-1", start: t0.Add(10 * time.Second), end: t0.Add(14 * time.Second)}}}
	var pts []point
	for i := range 12 {
		pts = append(pts, point{at: t0.Add(time.Duration(i) * sampleEvery), acks: 3 * i, mails: 2 * i, backlog: i % 4, rss: 300e6, redisMem: 4e6})
	}
	s := summary{duration: time.Minute, faults: c.faults, v: verdict{afterUnsub: 1}, failed: map[string]int{"subscribe 503": 2}}
	if err := writeReport(dir, s); err != nil {
		t.Fatal(err)
	}
	if err := writePlot(dir, pts, c); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(md), "# Soak report: FAIL") || !strings.Contains(string(md), "| mails composed after an acknowledged unsubscribe | 1 | 0 | **breach** |") {
		t.Fatalf("report:\n%s", md)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "plot.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
		t.Fatalf("plot.png: %v", err)
	}
}
