package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// summary is what the report states.
type summary struct {
	duration, drainTook  time.Duration
	faults               []fault
	acks                 int
	failed               map[string]int
	v                    verdict
	dupBound             int
	p99Faults, p99All    time.Duration
	nFaults, nAll        int
	rssSlope, redisSlope float64 // MB a minute
	rssMean, redisMean   float64 // MB
	procSlope            float64 // MB a minute, the steepest single process
	procWho              string
	settings             string // the knobs of the run, as the report's header says them
	crashes              int
	mails                int
	texts                int // texts the SMS gateway's fake took
	issues               int
	minuteChecks         []string
	ok                   bool
}

func writeReport(dir string, s summary) error {
	var b strings.Builder
	verdict := "PASS"
	if !s.ok {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "# Soak report: %s\n\n%s of load and faults (%s), then %s to drain. Plot: [plot.png](plot.png).\n\n", verdict, s.duration, s.settings, s.drainTook.Round(time.Second))
	b.WriteString("| measure | value | bound | |\n| --- | --- | --- | --- |\n")
	row := func(name string, val any, bound string, good bool) {
		mark := "ok"
		if !good {
			mark = "**breach**"
		}
		fmt.Fprintf(&b, "| %s | %v | %s | %s |\n", name, val, bound, mark)
	}
	row("faults injected", len(s.faults), "", true)
	row("writes acknowledged", s.acks, "", true)
	row("addresses read back", s.v.people, "", true)
	row("acknowledged writes lost", s.v.lost, "0", s.v.lost == 0)
	row("state differs from the last acknowledged write", s.v.wrongState, "0", s.v.wrongState == 0)
	row("mails sent", s.mails, "", true)
	row("texts sent (SMS, in the mail rows below as sms:…)", s.texts, "", true)
	row("issues sent", s.issues, "", true)
	row("mails due, missing", s.v.missing, "0", s.v.missing == 0)
	row("duplicate mails", fmt.Sprintf("%d %v", s.v.dups, s.v.dupKinds), fmt.Sprintf("≤ %d", s.dupBound), s.v.dups <= s.dupBound)
	row("mails composed after an acknowledged unsubscribe", s.v.afterUnsub, "0", s.v.afterUnsub == 0)
	row("mails composed before an unsubscribe, landed after it", s.v.inFlight, "printed", true)
	row("welcome mails early", s.v.early, "0", s.v.early == 0)
	row("tasks not drained", s.v.pending, "0", s.v.pending == 0)
	row("dead-letter (archived) tasks", s.v.archived, "0", s.v.archived == 0)
	row("role exits nobody asked for", s.crashes, "0", s.crashes == 0)
	row("p99 subscribe during faults", fmt.Sprintf("%s (%d requests)", s.p99Faults.Round(time.Millisecond), s.nFaults), "", true)
	row("p99 subscribe, whole run", fmt.Sprintf("%s (%d requests)", s.p99All.Round(time.Millisecond), s.nAll), "", true)
	row("RSS of the roles, slope after warm-up", fmt.Sprintf("%+.2f MB/min (mean %.0f MB)", s.rssSlope, s.rssMean), "printed", true)
	row("RSS of one process, steepest slope after warm-up", fmt.Sprintf("%+.2f MB/min: %s", s.procSlope, s.procWho), "printed", true)
	row("Redis used_memory, slope after warm-up", fmt.Sprintf("%+.3f MB/min (mean %.1f MB)", s.redisSlope, s.redisMean), "printed", true)
	b.WriteString("\n## Faults\n\n| start | end | fault | error |\n| --- | --- | --- | --- |\n")
	for _, f := range s.faults {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.start.Format(time.TimeOnly), f.end.Format(time.TimeOnly), f.name, f.err)
	}
	b.WriteString("\n## Requests not acknowledged (by route and status; 0 is no answer, minus a status: answered but not saved, such as a preference change answered 200 You are not subscribed)\n\n")
	for k, n := range s.failed {
		fmt.Fprintf(&b, "- %s: %d\n", k, n)
	}
	section(&b, "Checks every minute", s.minuteChecks)
	section(&b, "Archived tasks (reasons)", s.v.archivedReasons)
	section(&b, "Notes (the first breaches)", s.v.notes)
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

func section(b *strings.Builder, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n", title)
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", l)
	}
}

// writePlot draws the rates (acknowledged writes and mails a second),
// the backlog, and below them the faults running and the memory, over
// the run's minutes, into plot.png.
func writePlot(dir string, points []point, c *chaos) error {
	if len(points) < 2 {
		return nil
	}
	t0 := points[0].at
	var acks, mails, back, faults, rss, mem plotter.XYs
	for i, p := range points {
		x := p.at.Sub(t0).Minutes()
		if i > 0 {
			dt := p.at.Sub(points[i-1].at).Seconds()
			acks = append(acks, plotter.XY{X: x, Y: float64(p.acks-points[i-1].acks) / dt})
			mails = append(mails, plotter.XY{X: x, Y: float64(p.mails-points[i-1].mails) / dt})
		}
		back = append(back, plotter.XY{X: x, Y: float64(max(p.backlog, 0))})
		faults = append(faults, plotter.XY{X: x, Y: float64(c.activeAt(p.at))})
		rss = append(rss, plotter.XY{X: x, Y: p.rss / 1e6})
		mem = append(mem, plotter.XY{X: x, Y: p.redisMem / 1e6})
	}
	panels := []struct {
		title, unit string
		series      map[string]plotter.XYs
	}{
		{"rates", "per second", map[string]plotter.XYs{"writes acked/s": acks, "mails/s": mails}},
		{"backlog", "tasks waiting", map[string]plotter.XYs{"backlog": back}},
		{"faults", "running", map[string]plotter.XYs{"faults running": faults}},
		{"memory", "MB", map[string]plotter.XYs{"roles' RSS": rss, "Redis used_memory": mem}},
	}
	rows := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p, err := linePlot(pn.title, pn.unit, pn.series)
		if err != nil {
			return err
		}
		rows[i] = []*plot.Plot{p}
	}
	img := vgimg.New(10*vg.Inch, 11*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(filepath.Join(dir, "plot.png"))
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		warn("close plot", f.Close())
		return err
	}
	return f.Close()
}

func linePlot(title, ylabel string, series map[string]plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "minutes"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	colors := []color.Color{color.RGBA{R: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{B: 200, A: 255}}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		l, err := plotter.NewLine(series[n])
		if err != nil {
			return nil, err
		}
		l.Color = colors[i%len(colors)]
		p.Add(l)
		p.Legend.Add(n, l)
	}
	return p, nil
}
