package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// statsScript counts one shard's subscribers of each status and topic
// (Stats): BITCOUNT of each bitmap, and of each topic's AND the active one
// (in a scratch key, deleted before the script ends).
//
//	KEYS[1]    the shard's anchor
//	ARGV[1]    n, the number of statuses
//	ARGV[2…n+1] the status bitmaps' suffixes (statusBitmap)
//	ARGV[n+2…] the topic bitmaps' suffixes
//
// Answers the n status counts, then per topic its count and its active
// count.
var statsScript = subscriberScript(`
local SCRATCH = PFX .. 'scratch'
local out, ns = {}, tonumber(ARGV[1])
for i = 2, ns + 1 do out[#out + 1] = redis.call('BITCOUNT', PFX .. ARGV[i]) end
for i = ns + 2, #ARGV do
  out[#out + 1] = redis.call('BITCOUNT', PFX .. ARGV[i])
  redis.call('BITOP', 'AND', SCRATCH, PFX .. ARGV[i], ACTIVE)
  out[#out + 1] = redis.call('BITCOUNT', SCRATCH)
end
redis.call('DEL', SCRATCH)
return out
`)

// Stats implements People: each shard counts its own (statsScript), in one
// round trip; the day's counters, summed over the shards, in a second.
func (r *Redis) Stats(ctx context.Context, ndays int) (Stats, error) {
	st, _, err := r.StatsAndGrowth(ctx, ndays)
	return st, err
}

// StatsAndGrowth is Stats and Growth from one read of the day counters
// (the console's overview shows both).
func (r *Redis) StatsAndGrowth(ctx context.Context, ndays int) (Stats, []TopicGrowth, error) {
	tl := r.tl() // one list throughout, though the console changes it meanwhile
	if ndays < 0 || ndays > MaxStatsDays {
		return Stats{}, nil, fmt.Errorf("%w: %d days (want 0..%d)", ErrBadQuery, ndays, MaxStatsDays)
	}
	args := []any{len(Statuses)}
	for _, st := range Statuses {
		args = append(args, statusBitmap(st))
	}
	for _, t := range tl.ids {
		args = append(args, topicSfx(t))
	}
	dayKeys := r.lastDays(ndays)
	shards := everyShard()
	all := make([][]any, len(shards))
	for i := range all {
		all[i] = args
	}
	counts, err := runPipelined(ctx, r.rdb, statsScript, func(i int) []string { return []string{anchor(shards[i])} }, all)
	if err != nil {
		return Stats{}, nil, fmt.Errorf("stats: %w", err)
	}
	sums, err := r.daySums(ctx, dayKeys)
	if err != nil {
		return Stats{}, nil, fmt.Errorf("stats: %w", err)
	}
	want := len(Statuses) + 2*len(tl.ids)
	n := make([]int64, want)
	for _, c := range counts {
		got, err := c.Int64Slice()
		if err != nil || len(got) != want {
			return Stats{}, nil, fmt.Errorf("stats: %d counts for %d statuses and %d topics: %v", len(got), len(Statuses), len(tl.ids), err)
		}
		for i, v := range got {
			n[i] += v
		}
	}
	out := Stats{ByStatus: map[Status]int64{}, ByTopic: []TopicCount{}, Days: make([]DayCount, 0, ndays)}
	for i, st := range Statuses {
		out.ByStatus[st] = n[i]
	}
	for i, t := range tl.ids {
		j := len(Statuses) + 2*i
		out.ByTopic = append(out.ByTopic, TopicCount{Topic: t, Subscribers: n[j], Active: n[j+1]})
	}
	for k, d := range dayKeys {
		sum := sums[k]
		out.Days = append(out.Days, DayCount{Day: d, Signups: sum["signup"], Imports: sum["import"],
			Confirmations: sum["confirm"], Unsubscribes: sum["unsubscribe"], Bounces: sum["bounce"],
			Complaints: sum["complaint"], Erasures: sum["erase"]})
	}
	return out, r.growthOf(dayKeys, sums), nil
}

// lastDays are the dates (YYYY-MM-DD, UTC) of the last n days, oldest
// first, today last.
func (r *Redis) lastDays(n int) []string {
	today := r.now().UTC()
	out := make([]string, n)
	for i := range n {
		out[i] = today.AddDate(0, 0, i-n+1).Format(time.DateOnly)
	}
	return out
}

// daySums reads the counters of each day (YYYY-MM-DD) in every shard, in
// one round trip, and sums each field over the shards.
func (r *Redis) daySums(ctx context.Context, dayKeys []string) ([]map[string]int64, error) {
	out := make([]map[string]int64, len(dayKeys))
	for k := range out {
		out[k] = map[string]int64{}
	}
	if len(dayKeys) == 0 {
		return out, nil
	}
	shards := everyShard()
	days := make([][]*redis.MapStringStringCmd, len(shards))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range shards {
			for _, d := range dayKeys {
				days[i] = append(days[i], p.HGetAll(ctx, dayKeyOf(s, d)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("daily counters: %w", err)
	}
	for k := range dayKeys {
		for i := range shards {
			for f, v := range days[i][k].Val() {
				x, _ := strconv.ParseInt(v, 10, 64)
				out[k][f] += x
			}
		}
	}
	return out, nil
}
