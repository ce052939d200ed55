package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/newsletter/newsletter/store"
)

// The chart's size in SVG units; the page scales it to its width.
const (
	chartWidth  = 900
	chartHeight = 220
	chartPad    = 30
)

// chartSeries are the lines, each with its colour and name (the legend
// and the accessible description say the same).
var chartSeries = []struct {
	Name, Colour string
	Of           func(store.DayCount) int64
}{
	{"signups", "#1d4ed8", func(d store.DayCount) int64 { return d.Signups }},
	{"confirmations", "#15803d", func(d store.DayCount) int64 { return d.Confirmations }},
	{"unsubscribes", "#b91c1c", func(d store.DayCount) int64 { return d.Unsubscribes }},
}

// chart draws days as an inline SVG line chart: drawn here, so the page
// needs no script and no chart library. Every value is a number the
// server formats, so the markup carries nothing from outside.
func chart(days []store.DayCount) template.HTML {
	if len(days) == 0 {
		return ""
	}
	var top int64 = 1
	totals := make([]int64, len(chartSeries))
	for _, d := range days {
		for i, s := range chartSeries {
			v := s.Of(d)
			top = max(top, v)
			totals[i] += v
		}
	}
	plotW, plotH := float64(chartWidth-2*chartPad), float64(chartHeight-2*chartPad)
	x := func(i int) float64 {
		if len(days) == 1 {
			return chartPad
		}
		return chartPad + plotW*float64(i)/float64(len(days)-1)
	}
	y := func(v int64) float64 { return chartPad + plotH - plotH*float64(v)/float64(top) }
	var b strings.Builder
	desc := make([]string, len(chartSeries))
	for i, s := range chartSeries {
		desc[i] = fmt.Sprintf("%d %s", totals[i], s.Name)
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">`, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<title id="chart-title">Signups, confirmations and unsubscribes per day, last %d days</title>`, len(days))
	first, last := chartDay(days[0].Day), chartDay(days[len(days)-1].Day)
	fmt.Fprintf(&b, `<desc id="chart-desc">From %s to %s: %s.</desc>`, first.Format(time.DateOnly), last.Format(time.DateOnly), strings.Join(desc, ", "))
	// Grid: the top value and zero.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, chartPad, y(top), chartWidth-chartPad, y(top))
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`, chartPad, y(0), chartWidth-chartPad, y(0))
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label" text-anchor="end">%d</text>`, chartPad-4, y(top)+4, top)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label" text-anchor="end">0</text>`, chartPad-4, y(0)+4)
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s</text>`, chartPad, chartHeight-8, first.Format("Jan 2"))
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`, chartWidth-chartPad, chartHeight-8, last.Format("Jan 2"))
	for _, s := range chartSeries {
		pts := make([]string, len(days))
		for i, d := range days {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), y(s.Of(d)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round" points="%s"><title>%s</title></polyline>`, s.Colour, strings.Join(pts, " "), s.Name)
	}
	// The legend.
	for i, s := range chartSeries {
		lx := chartPad + 10 + i*170
		fmt.Fprintf(&b, `<rect x="%d" y="8" width="12" height="12" fill="%s"/><text x="%d" y="18" class="label">%s (%d)</text>`, lx, s.Colour, lx+16, s.Name, totals[i])
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every byte above is formatted here from numbers, dates and fixed names
}

// chartDay reads a counter's day (YYYY-MM-DD, the store's). The store
// writes it, so it always parses; a zero date would show, never a
// string from outside.
func chartDay(day string) time.Time {
	t, _ := time.Parse(time.DateOnly, day)
	return t
}
