package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A search by domain ("example.org" or "@example.org": everyone at it)
// reads the search index (search.go) with ZSCAN, every shard's side by
// side, keeping the entries whose key is an address at the domain: no
// index of its own, so no memory per subscriber (issue #48 counts the
// search index's), at the cost of a bounded read. It stops at
// MaxDomainHits people or MaxDomainScan entries read, whichever first,
// and says whether it read the whole index.

// MaxDomainHits is the most people a domain search lists.
const MaxDomainHits = 200

// MaxDomainScan bounds the index entries a domain search reads: about
// four a person (the address and the name's words), so a list of some
// 250,000 people is read whole.
const MaxDomainScan = 1_000_000

// domainScanCount is each ZSCAN's COUNT: a shard's page of entries.
const domainScanCount = 1000

// SearchDomainOf reads q as a domain search: "@example.org", or a bare
// domain ("example.org": a dot, no "@", letters, digits and hyphens);
// false for any other query.
func SearchDomainOf(q string) (string, bool) {
	d := searchPrefix(q)
	at := strings.HasPrefix(d, "@")
	d = strings.TrimPrefix(d, "@")
	if d == "" || len(d) > 253 || (!at && !strings.Contains(d, ".")) {
		return "", false
	}
	for _, c := range d {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	return d, true
}

// SearchDomain lists up to MaxDomainHits people whose address is at
// domain (SearchDomainOf's), in no set order; complete says the whole
// index was read (else a bound stopped it: there may be more).
func (r *Redis) SearchDomain(ctx context.Context, domain string) (subs []Subscriber, complete bool, err error) {
	d, ok := SearchDomainOf(domain)
	if !ok {
		return nil, false, fmt.Errorf("%w: %q is not a domain", ErrBadQuery, domain)
	}
	match := "*@" + d + "\x00*" // the address key, then the id (splitMember)
	shards := everyShard()
	cursors := make([]uint64, len(shards))
	done := make([]bool, len(shards))
	seen := map[int64]bool{}
	var ids []int64
	for read := 0; read < MaxDomainScan && len(ids) < MaxDomainHits; read += domainScanCount * len(shards) {
		cmds := make([]*redis.ScanCmd, len(shards))
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, s := range shards {
				if !done[i] {
					cmds[i] = p.ZScan(ctx, s.key(sfxSearch), cursors[i], match, domainScanCount)
				}
			}
			return nil
		}); err != nil {
			return nil, false, fmt.Errorf("search the domain: %w", err)
		}
		left := false
		for i, c := range cmds {
			if c == nil {
				continue
			}
			keys, next := c.Val()
			for j := 0; j < len(keys); j += 2 { // member, score
				if key, id, ok := splitMember(keys[j]); ok && strings.HasSuffix(key, "@"+d) && !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			cursors[i], done[i] = next, next == 0
			left = left || next != 0
		}
		if !left {
			complete = true
			break
		}
	}
	if len(ids) > MaxDomainHits {
		ids = ids[:MaxDomainHits]
	}
	subs, err = r.SubscribersByID(ctx, ids)
	if err != nil {
		return nil, false, err
	}
	return subs, complete, nil
}
