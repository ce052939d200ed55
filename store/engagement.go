package store

import (
	"context"
	"time"
)

// Engagement is what an issue's readers did with it, counted in aggregate
// (NEWSLETTER_ENGAGEMENT): how often each link was followed and by how
// many distinct readers, and, when NEWSLETTER_OPENS is on, its opens.
// Machine clicks and opens (link scanners, mail-privacy proxies) are
// counted apart and never as readers.
type Engagement struct {
	Links          []LinkStat `json:"links"`
	Clicks         int64      `json:"clicks"`
	UniqueClickers int64      `json:"unique_clickers"`
	MachineClicks  int64      `json:"machine_clicks"`
	Opens          int64      `json:"opens"`
	UniqueOpeners  int64      `json:"unique_openers"`
	MachineOpens   int64      `json:"machine_opens"`
	// Hours are the counts by hour (UTC), oldest first: the report's chart.
	Hours []HourCount `json:"hours"`
}

// LinkStat is one link of an issue, by its index in the issue's body.
type LinkStat struct {
	Index          int    `json:"index"`
	URL            string `json:"url"`
	Clicks         int64  `json:"clicks"`
	UniqueClickers int64  `json:"unique_clickers"`
	MachineClicks  int64  `json:"machine_clicks"`
}

// HourCount is one hour's counts of an issue's engagement.
type HourCount struct {
	Hour          time.Time `json:"hour"`
	Clicks        int64     `json:"clicks"`
	MachineClicks int64     `json:"machine_clicks"`
	Opens         int64     `json:"opens"`
	MachineOpens  int64     `json:"machine_opens"`
}

// EngagementReader gives an issue's counted engagement; an issue nobody
// engaged with has a zero Engagement, not an error.
type EngagementReader interface {
	IssueEngagement(ctx context.Context, issueID int64) (Engagement, error)
}

// The counted redirect's store is what the reports read.
var _ EngagementReader = (*Redis)(nil)
