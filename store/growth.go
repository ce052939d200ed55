package store

import (
	"context"
	"fmt"
)

// The sources a topic's growth is counted by: the consent's source
// (ConsentSource) of each subscription that became active with the topic
// on, and GrowthOther for one recorded before sources were.
const GrowthOther = "other"

// GrowthSources are the sources in the order the console and the API
// list them.
var GrowthSources = []string{string(SourceForm), string(SourceImport), string(SourceAPI), string(SourceAdmin), GrowthOther}

// GrowthDay is one day's (UTC) new active subscriptions of a topic, by
// how they came in: a signup on the form confirmed, an import, a
// signup through the API (POST /subscribe with JSON), a person added by
// hand (the console, POST /api/subscribers: the admin source, which the
// overview once left out, so that a list built by hand grew by 0), and
// the rest.
type GrowthDay struct {
	Day    string `json:"day"` // YYYY-MM-DD
	Form   int64  `json:"form"`
	Import int64  `json:"import"`
	API    int64  `json:"api"`
	Admin  int64  `json:"admin"`
	Other  int64  `json:"other"`
}

// Of is d's count of source (GrowthSources).
func (d GrowthDay) Of(source string) int64 {
	switch source {
	case string(SourceForm):
		return d.Form
	case string(SourceImport):
		return d.Import
	case string(SourceAPI):
		return d.API
	case string(SourceAdmin):
		return d.Admin
	}
	return d.Other
}

// TopicGrowth is a topic's growth over the last days, oldest first, today
// last, and its totals.
type TopicGrowth struct {
	Topic string      `json:"topic"`
	Days  []GrowthDay `json:"days"`
	Total GrowthDay   `json:"total"` // Day empty: the sums
}

// growthField is the field of the day's counters (sfxDay) that grow (Lua,
// scripts.go) counts for source and topic.
func growthField(source, topic string) string { return "g:" + source + ":" + topic }

// Growth is every topic's growth over the last ndays days (at most
// MaxStatsDays): each subscription that became active (a confirmation,
// an activated signup or import) counts once for each topic it has on,
// under its consent's source, in the same script as the change, in the
// shard's day counters; a day's figure is their sum over the shards.
func (r *Redis) Growth(ctx context.Context, ndays int) ([]TopicGrowth, error) {
	if ndays < 0 || ndays > MaxStatsDays {
		return nil, fmt.Errorf("%w: %d days (want 0..%d)", ErrBadQuery, ndays, MaxStatsDays)
	}
	dayKeys := r.lastDays(ndays)
	sums, err := r.daySums(ctx, dayKeys)
	if err != nil {
		return nil, fmt.Errorf("growth: %w", err)
	}
	return r.growthOf(dayKeys, sums), nil
}

// growthOf picks every topic's growth out of the days' summed counters
// (daySums of dayKeys).
func (r *Redis) growthOf(dayKeys []string, sums []map[string]int64) []TopicGrowth {
	out := make([]TopicGrowth, 0, len(r.tl().ids))
	for _, t := range r.tl().ids {
		g := TopicGrowth{Topic: t, Days: make([]GrowthDay, len(dayKeys))}
		for k, d := range dayKeys {
			sum := sums[k]
			day := GrowthDay{Day: d, Form: sum[growthField(string(SourceForm), t)], Import: sum[growthField(string(SourceImport), t)],
				API: sum[growthField(string(SourceAPI), t)], Admin: sum[growthField(string(SourceAdmin), t)], Other: sum[growthField(GrowthOther, t)]}
			g.Days[k] = day
			g.Total.Form += day.Form
			g.Total.Import += day.Import
			g.Total.API += day.API
			g.Total.Admin += day.Admin
			g.Total.Other += day.Other
		}
		out = append(out, g)
	}
	return out
}

// TopicGrowthOf is topic's growth among all (Growth's answer); false
// when topic is not one of them.
func TopicGrowthOf(all []TopicGrowth, topic string) (TopicGrowth, bool) {
	for _, g := range all {
		if g.Topic == topic {
			return g, true
		}
	}
	return TopicGrowth{}, false
}
