package issues

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/internal/csvcell"
	"github.com/newsletter/newsletter/store"
)

// ReportStore is the store's side of an issue's report: its sending's
// counts and the people who left through its links.
type ReportStore interface {
	IssueProgress(ctx context.Context, id int64) (store.IssueProgress, error)
	IssueUnsubscribes(ctx context.Context, id int64) (int64, error)
}

// Report is what became of an issue: what was delivered, what came back
// (bounces, complaints), who left because of it, and what its readers
// did with its links, by link and by hour. Machine clicks and opens
// (link scanners, mail-privacy proxies) are counted apart, never as
// readers.
type Report struct {
	Issue   int64     `json:"issue"`
	Subject string    `json:"subject"`
	Status  string    `json:"status"`
	SentAt  time.Time `json:"sent_at,omitzero"`
	// The sending (store.IssueProgress): Delivered is its sent.
	Planned    int64 `json:"planned"`
	Delivered  int64 `json:"delivered"`
	Skipped    int64 `json:"skipped"`
	Failed     int64 `json:"failed"`
	Bounced    int64 `json:"bounced"`
	Complained int64 `json:"complained"`
	// Unsubscribed counts the people who left through this issue's own
	// unsubscribe (the page or the List-Unsubscribe one-click) or
	// preferences links, each once; leaving by any other way is not
	// this issue's.
	Unsubscribed int64 `json:"unsubscribed"`
	// The engagement (store.Engagement); zero where nothing is counted.
	Clicks         int64            `json:"clicks"`
	UniqueClickers int64            `json:"unique_clickers"`
	MachineClicks  int64            `json:"machine_clicks"`
	Opens          int64            `json:"opens"`
	UniqueOpeners  int64            `json:"unique_openers"`
	MachineOpens   int64            `json:"machine_opens"`
	Links          []store.LinkStat `json:"links"`
	// Hours are the counts hour by hour from the first (Since 0), every
	// hour in between included, oldest first.
	Hours []ReportHour `json:"hours"`
	// Tens are the first store.FineHours by store.FineBucket (ten
	// minutes), laid out as Hours are: the chart of a send just begun.
	Tens []ReportHour `json:"tens"`
}

// ReportHour is one hour of an issue's engagement.
type ReportHour struct {
	// Since is the hour's number counted from the report's first hour:
	// the hour the send began (SendAt, for a scheduled one) or, for one
	// sent at once, the first hour anything was counted.
	Since         int       `json:"since"`
	Hour          time.Time `json:"hour"`
	Clicks        int64     `json:"clicks"`
	MachineClicks int64     `json:"machine_clicks"`
	Opens         int64     `json:"opens"`
	MachineOpens  int64     `json:"machine_opens"`
}

// HasReport tells an issue that has a report: one whose sending began.
func HasReport(is store.Issue) bool {
	switch is.Status {
	case store.IssueSending, store.IssueSent:
		return true
	case store.IssuePaused:
		return is.PausedFrom == store.IssueSending
	}
	return false
}

// BuildReport gathers is's report from st and eng (nil: no engagement is
// counted here, its figures are zero).
func BuildReport(ctx context.Context, st ReportStore, eng store.EngagementReader, is store.Issue) (Report, error) {
	p, err := st.IssueProgress(ctx, is.ID)
	if err != nil {
		return Report{}, err
	}
	left, err := st.IssueUnsubscribes(ctx, is.ID)
	if err != nil {
		return Report{}, err
	}
	var e store.Engagement
	if eng != nil {
		if e, err = eng.IssueEngagement(ctx, is.ID); err != nil {
			return Report{}, fmt.Errorf("the engagement of issue %d: %w", is.ID, err)
		}
	}
	rep := Report{Issue: is.ID, Subject: is.Subject, Status: is.Status, SentAt: is.SentAt,
		Planned: p.Planned, Delivered: p.Sent, Skipped: p.Skipped, Failed: p.Failed, Bounced: p.Bounces, Complained: p.Complaints,
		Unsubscribed: left,
		Clicks:       e.Clicks, UniqueClickers: e.UniqueClickers, MachineClicks: e.MachineClicks,
		Opens: e.Opens, UniqueOpeners: e.UniqueOpeners, MachineOpens: e.MachineOpens,
		Links: e.Links, Hours: reportHours(is.SendAt, e.Hours, time.Hour, maxReportHours),
		Tens: reportHours(is.SendAt, e.Tens, store.FineBucket, int(store.FineHours*time.Hour/store.FineBucket))}
	if rep.Links == nil {
		rep.Links = []store.LinkStat{}
	}
	return rep, nil
}

// maxReportHours bounds the hours a report spans (the marks' 120 days):
// counts the source gives past it are left out of the hours, never out of
// the totals.
const maxReportHours = 120 * 24

// reportHours lays the source's buckets of width (oldest first, perhaps
// with some missing) on a line of every bucket from the first, at most
// limit: the send's start (start, when set and not later) or the first
// counted bucket.
func reportHours(start time.Time, hours []store.HourCount, width time.Duration, limit int) []ReportHour {
	if len(hours) == 0 {
		return []ReportHour{}
	}
	first := hours[0].Hour.UTC().Truncate(width)
	if !start.IsZero() && start.UTC().Truncate(width).Before(first) {
		first = start.UTC().Truncate(width)
	}
	last := first
	for _, h := range hours {
		if t := h.Hour.UTC().Truncate(width); t.After(last) {
			last = t
		}
	}
	n := min(int(last.Sub(first)/width)+1, limit)
	out := make([]ReportHour, n)
	for i := range out {
		out[i] = ReportHour{Since: i, Hour: first.Add(time.Duration(i) * width)}
	}
	for _, h := range hours {
		i := int(h.Hour.UTC().Truncate(width).Sub(first) / width)
		if i < 0 || i >= n {
			continue
		}
		out[i].Clicks += h.Clicks
		out[i].MachineClicks += h.MachineClicks
		out[i].Opens += h.Opens
		out[i].MachineOpens += h.MachineOpens
	}
	return out
}

// ReportCSVHeader is the CSV's first line: one row per link ("link", the
// link's index in the issue's body, its URL and counts), then one row
// "total" with the issue's counts (index and URL empty).
var ReportCSVHeader = []string{"row", "index", "url", "clicks", "unique_clickers", "machine_clicks"}

// WriteReportCSV writes rep's links and totals as CSV (ReportCSVHeader).
// A URL a spreadsheet would take for a formula (=, +, -, @ first) is
// written with a leading apostrophe, so opening the file runs nothing.
func WriteReportCSV(w io.Writer, rep Report) error {
	cw := csv.NewWriter(w)
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	rows := [][]string{ReportCSVHeader}
	for _, l := range rep.Links {
		rows = append(rows, []string{"link", strconv.Itoa(l.Index), csvcell.Guard(l.URL), n(l.Clicks), n(l.UniqueClickers), n(l.MachineClicks)})
	}
	rows = append(rows, []string{"total", "", "", n(rep.Clicks), n(rep.UniqueClickers), n(rep.MachineClicks)})
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("write the report's CSV: %w", err)
	}
	return nil
}
