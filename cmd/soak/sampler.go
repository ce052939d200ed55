package main

import (
	"context"
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
}

const sampleEvery = 5 * time.Second

func samplePoint(ctx context.Context, rdb *redis.Client, rs *redisSet, roles []*role, led *ledger, mails int) point {
	p := point{at: time.Now(), mails: mails, backlog: -1}
	led.mu.Lock()
	p.acks = led.acks
	led.mu.Unlock()
	for _, r := range roles {
		p.rss += r.rss()
	}
	if mem, err := rs.UsedMemory(ctx, rdb); err == nil {
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
