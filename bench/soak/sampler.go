package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// point is one sample of the run, every sampleEvery.
type point struct {
	at       time.Time
	acks     int     // acknowledged writes so far
	mails    int     // mails the sink took so far
	backlog  int     // tasks waiting (-1: Redis did not answer)
	rss      float64 // the roles' resident sets, summed, bytes
	redisMem float64 // the primary's used_memory, bytes
	// procs is each live role process's resident set, by role and pid:
	// a process's own slope is not broken by the restarts of the others.
	procs map[procKey]float64
}

type procKey struct {
	role string
	pid  int
}

const sampleEvery = 5 * time.Second

func samplePoint(ctx context.Context, rdb redis.UniversalClient, rs redisBackend, roles []*role, led *ledger, mails int) point {
	p := point{at: time.Now(), mails: mails, backlog: -1}
	led.mu.Lock()
	p.acks = led.acks
	led.mu.Unlock()
	p.procs = map[procKey]float64{}
	for _, r := range roles {
		rss, pid := r.rss(), r.pid()
		p.rss += rss
		if pid != 0 && rss > 0 {
			p.procs[procKey{r.name, pid}] = rss
		}
	}
	if mem, err := rs.usedMemory(ctx, rdb); err == nil {
		p.redisMem = mem
	}
	if w, _, _, err := backlog(rdb); err == nil {
		p.backlog = w
	}
	return p
}

// slope is the least-squares slope of y over the points after warm-up,
// in y's unit a minute.
func slope(points []point, from time.Time, y func(point) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		if p.at.Before(from) {
			continue
		}
		x := p.at.Sub(from).Minutes()
		v := y(p)
		n++
		sx += x
		sy += v
		sxx += x * x
		sxy += x * v
	}
	if n < 3 || n*sxx-sx*sx == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// steepestProcess is the largest RSS slope (MB a minute) of one role
// process over its samples after warm-up (at least six of them: half a
// minute), and which process it is.
func steepestProcess(points []point, from time.Time) (float64, string) {
	series := map[procKey][]point{}
	for _, p := range points {
		for k, rss := range p.procs {
			series[k] = append(series[k], point{at: p.at, rss: rss})
		}
	}
	best, who := 0.0, ""
	for k, pts := range series {
		n := 0
		for _, p := range pts {
			if !p.at.Before(from) {
				n++
			}
		}
		if n < 6 {
			continue
		}
		if s := slope(pts, from, func(p point) float64 { return p.rss / 1e6 }); who == "" || s > best {
			best, who = s, fmt.Sprintf("%s (pid %d, %d samples)", k.role, k.pid, n)
		}
	}
	return best, who
}
