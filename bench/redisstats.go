package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisStats are Redis's counters: per command (calls and µs, from INFO
// commandstats; a script's commands are counted under their own names as
// well as in its EVALSHA) and the requests it read (total_reads_processed:
// a pipeline is one, and each costs Redis a read and a write system call,
// most of what a small command costs it).
type RedisStats struct {
	Commands map[string]CommandStat
	Reads    int64
}

// CommandStat is one command's calls and the µs Redis spent in them.
type CommandStat struct {
	Calls, Usec int64
}

// ReadRedisStats reads the counters.
func ReadRedisStats(ctx context.Context, rdb *redis.Client) (RedisStats, error) {
	info, err := rdb.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return RedisStats{}, err
	}
	st := RedisStats{Commands: map[string]CommandStat{}}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
			st.Reads, _ = strconv.ParseInt(v, 10, 64)
		}
		name, rest, ok := strings.Cut(line, ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var c CommandStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				c.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				c.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		st.Commands[name] = c
	}
	return st, nil
}

// Since is what was counted between before and s.
func (s RedisStats) Since(before RedisStats) RedisStats {
	d := RedisStats{Commands: map[string]CommandStat{}, Reads: s.Reads - before.Reads}
	for name, c := range s.Commands {
		b := before.Commands[name]
		if c.Calls > b.Calls {
			d.Commands[name] = CommandStat{Calls: c.Calls - b.Calls, Usec: c.Usec - b.Usec}
		}
	}
	return d
}

// PerMail describes the counters divided by mails: requests, commands, and
// the commands that took the most of Redis's time.
func (s RedisStats) PerMail(mails int64, top int) string {
	if mails <= 0 {
		return ""
	}
	type named struct {
		name string
		CommandStat
	}
	var all []named
	var calls int64
	for name, c := range s.Commands {
		if name == "info" || name == "memory|usage" {
			continue // the harness's own polling
		}
		all = append(all, named{name, c})
		calls += c.Calls
	}
	slices.SortFunc(all, func(a, b named) int { return cmp.Compare(b.Usec, a.Usec) })
	m := float64(mails)
	out := fmt.Sprintf("%.3f requests, %.2f commands a mail; by time:", float64(s.Reads)/m, float64(calls)/m)
	for _, c := range all[:min(top, len(all))] {
		out += fmt.Sprintf(" %s %.3f calls %.1f µs,", c.name, float64(c.Calls)/m, float64(c.Usec)/m)
	}
	return strings.TrimSuffix(out, ",")
}
