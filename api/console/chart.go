package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// The chart's size in SVG units; the page scales it to its width.
const (
	chartWidth  = 900
	chartHeight = 220
	chartPad    = 30
)

// chartLine is one line of a chart: its name (the legend and the
// accessible description say the same), its colour and its values, one
// per point.
type chartLine struct {
	Name, Colour string
	Values       []int64
}

// lineChart is what drawChart draws: ID makes its title and description
// ids unique on a page with several charts; Title and Span (e.g. "from
// Nov 5 to Dec 4") describe it; First and Last label the ends of the x
// axis. Every string is the console's own text, dates and numbers.
type lineChart struct {
	ID, Title, Span, First, Last string
	Lines                        []chartLine
}

// chartSeries are the overview's lines, each with its colour and name.
var chartSeries = []struct {
	Name, Colour string
	Of           func(store.DayCount) int64
}{
	{"signups", "#1d4ed8", func(d store.DayCount) int64 { return d.Signups }},
	{"confirmations", "#15803d", func(d store.DayCount) int64 { return d.Confirmations }},
	{"unsubscribes", "#b91c1c", func(d store.DayCount) int64 { return d.Unsubscribes }},
}

// chart draws the overview's days: signups, confirmations, unsubscribes.
func chart(days []store.DayCount) template.HTML {
	if len(days) == 0 {
		return ""
	}
	c := lineChart{ID: "chart", Title: fmt.Sprintf("Signups, confirmations and unsubscribes per day, last %d days", len(days))}
	c.Span, c.First, c.Last = daySpan(days[0].Day, days[len(days)-1].Day)
	for _, s := range chartSeries {
		l := chartLine{Name: s.Name, Colour: s.Colour, Values: make([]int64, len(days))}
		for i, d := range days {
			l.Values[i] = s.Of(d)
		}
		c.Lines = append(c.Lines, l)
	}
	return drawChart(c)
}

// growthColours are the sources' colours (store.GrowthSources' order).
var growthColours = []string{"#1d4ed8", "#7c3aed", "#0f766e", "#b45309", "#6b7280"}

// growthChart draws a topic's new subscriptions a day, one line per
// source.
func growthChart(name string, g store.TopicGrowth) template.HTML {
	if len(g.Days) == 0 {
		return ""
	}
	c := lineChart{ID: "growth-" + g.Topic, Title: fmt.Sprintf("New subscriptions to %s per day by source, last %d days", name, len(g.Days))}
	c.Span, c.First, c.Last = daySpan(g.Days[0].Day, g.Days[len(g.Days)-1].Day)
	for i, src := range store.GrowthSources {
		l := chartLine{Name: src, Colour: growthColours[i], Values: make([]int64, len(g.Days))}
		for j, d := range g.Days {
			l.Values[j] = d.Of(src)
		}
		c.Lines = append(c.Lines, l)
	}
	return drawChart(c)
}

// reportChart draws an issue's clicks from its first hour, readers' and
// machines' apart (and opens when any were counted): by ten minutes while
// everything counted fits the first store.FineHours (a send just begun
// would be one point by the hour), hour by hour after.
func reportChart(rep issues.Report) template.HTML {
	if len(rep.Hours) == 0 {
		return ""
	}
	buckets := rep.Hours
	n := len(buckets)
	c := lineChart{ID: "report-chart", Title: fmt.Sprintf("Clicks per hour over the first %d hours", n),
		Span:  fmt.Sprintf("From %s, hour by hour, UTC", buckets[0].Hour.Format("Jan 2 15:04")),
		First: "hour 0", Last: fmt.Sprintf("hour %d", n-1)}
	if n <= store.FineHours && len(rep.Tens) > 0 {
		buckets = rep.Tens
		n = len(buckets)
		mins := int(store.FineBucket / time.Minute)
		c = lineChart{ID: "report-chart", Title: fmt.Sprintf("Clicks per %d minutes over the first %d minutes", mins, n*mins),
			Span:  fmt.Sprintf("From %s, by %d minutes, UTC", buckets[0].Hour.Format("Jan 2 15:04"), mins),
			First: buckets[0].Hour.Format("15:04"), Last: buckets[n-1].Hour.Format("15:04")}
	}
	line := func(name, colour string, of func(issues.ReportHour) int64) chartLine {
		l := chartLine{Name: name, Colour: colour, Values: make([]int64, n)}
		for i, h := range buckets {
			l.Values[i] = of(h)
		}
		return l
	}
	c.Lines = []chartLine{
		line("clicks", "#1d4ed8", func(h issues.ReportHour) int64 { return h.Clicks }),
		line("machine clicks", "#9ca3af", func(h issues.ReportHour) int64 { return h.MachineClicks }),
	}
	if rep.Opens > 0 || rep.MachineOpens > 0 {
		c.Lines = append(c.Lines, line("opens", "#15803d", func(h issues.ReportHour) int64 { return h.Opens }))
	}
	return drawChart(c)
}

// daySpan describes the days from first to last (YYYY-MM-DD): the
// description's span and the axis labels.
func daySpan(first, last string) (span, from, to string) {
	f, l := chartDay(first), chartDay(last)
	return fmt.Sprintf("From %s to %s", f.Format(time.DateOnly), l.Format(time.DateOnly)), f.Format("Jan 2"), l.Format("Jan 2")
}

// drawChart draws c as an inline SVG line chart: drawn here, so the page
// needs no script and no chart library. Every value is a number the
// server formats or the console's own text, escaped all the same.
func drawChart(c lineChart) template.HTML {
	points := 0
	var top int64 = 1
	totals := make([]int64, len(c.Lines))
	for i, l := range c.Lines {
		points = max(points, len(l.Values))
		for _, v := range l.Values {
			top = max(top, v)
			totals[i] += v
		}
	}
	if points == 0 {
		return ""
	}
	esc := template.HTMLEscapeString
	plotW, plotH := float64(chartWidth-2*chartPad), float64(chartHeight-2*chartPad)
	x := func(i int) float64 {
		if points == 1 {
			return chartPad
		}
		return chartPad + plotW*float64(i)/float64(points-1)
	}
	y := func(v int64) float64 { return chartPad + plotH - plotH*float64(v)/float64(top) }
	var b strings.Builder
	desc := make([]string, len(c.Lines))
	for i, l := range c.Lines {
		desc[i] = fmt.Sprintf("%d %s", totals[i], l.Name)
	}
	id := esc(c.ID)
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title %s-desc" xmlns="http://www.w3.org/2000/svg">`, chartWidth, chartHeight, id, id)
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, id, esc(c.Title))
	fmt.Fprintf(&b, `<desc id="%s-desc">%s: %s.</desc>`, id, esc(c.Span), esc(strings.Join(desc, ", ")))
	// Grid: the top value and zero.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, chartPad, y(top), chartWidth-chartPad, y(top))
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="axis"/>`, chartPad, y(0), chartWidth-chartPad, y(0))
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label" text-anchor="end">%d</text>`, chartPad-4, y(top)+4, top)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="label" text-anchor="end">0</text>`, chartPad-4, y(0)+4)
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="label">%s</text>`, chartPad, chartHeight-8, esc(c.First))
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`, chartWidth-chartPad, chartHeight-8, esc(c.Last))
	for _, l := range c.Lines {
		pts := make([]string, len(l.Values))
		for i, v := range l.Values {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), y(v))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round" points="%s"><title>%s</title></polyline>`, esc(l.Colour), strings.Join(pts, " "), esc(l.Name))
	}
	// The legend.
	for i, l := range c.Lines {
		lx := chartPad + 10 + i*170
		fmt.Fprintf(&b, `<rect x="%d" y="8" width="12" height="12" fill="%s"/><text x="%d" y="18" class="label">%s (%d)</text>`, lx, esc(l.Colour), lx+16, esc(l.Name), totals[i])
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers formatted here; every string escaped above
}

// chartDay reads a counter's day (YYYY-MM-DD, the store's). The store
// writes it, so it always parses; a zero date would show, never a
// string from outside.
func chartDay(day string) time.Time {
	t, _ := time.Parse(time.DateOnly, day)
	return t
}
