package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Layout 3 put the keys that no subscriber's script touches into hash
// slots of their own (Redis Cluster runs a script only on keys of one
// slot): the publisher's content under {pub} (issues, digest runs, items,
// feeds, the issues' outbox), the stored tokens under {tok}, the webhook
// endpoints under {wh}. upgradeTo3 renames layout 2's keys; nothing else
// changed.

// layout3Keys are the single keys layout 3 renamed, old to new.
var layout3Keys = [][2]string{
	{"nl:issue:seq", keyIssueSeq}, {"nl:issues", keyIssues}, {"nl:issue:slugs", keyIssueSlugs},
	{"nl:archive:gen", keyArchiveGen},
	{"nl:item:seq", keyItemSeq}, {"nl:items", keyItems},
	{"nl:digest:lastitem", keyLastItem}, {"nl:digest:latest", keyLatestRun},
	{"nl:wh", keyWebhooks}, {"nl:tok", keyTokens}, {"nl:tok:name", keyTokenNames},
}

// layout3Prefixes are the families of keys layout 3 renamed: every key
// under old (but those under skip, which are another family's or stay)
// gets new in place of old.
var layout3Prefixes = []struct {
	old, new string
	skip     []string
}{
	{"nl:issue:", prefixIssue, []string{"nl:issue:audience:", "nl:issue:seq", "nl:issue:slugs"}},
	{"nl:items:", prefixItems, nil},
	{"nl:item:", prefixItem, []string{"nl:item:seq"}},
	{"nl:feed:", prefixFeed, nil},
	{"nl:digest:", prefixRun, []string{"nl:digest:outcome:", "nl:digest:lastitem", "nl:digest:latest"}},
	{"nl:wh:e:", prefixWebhook, nil},
}

// renameScript renames one key if it is still there: a second start-up
// running the upgrade at the same time, or again after a crash, finds it
// done.
//
//	KEYS[1]  the old name   KEYS[2]  the new name
//
// Answers 1 when it renamed, 0 when the old key was gone.
var renameScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
return 1
`)

// upgradeTo3 renames layout 2's keys to layout 3's and records layout 3.
// It runs on one Redis (a layout-2 data set never lived on a Cluster),
// can be stopped at any point and run again, and answers how many keys it
// renamed.
func (r *Redis) upgradeTo3(ctx context.Context, log *slog.Logger) (int, error) {
	var pairs [][2]string
	pairs = append(pairs, layout3Keys...)
	for _, f := range layout3Prefixes {
		iter := r.rdb.Scan(ctx, 0, f.old+"*", 1000).Iterator()
	keys:
		for iter.Next(ctx) {
			k := iter.Val()
			for _, s := range f.skip {
				if strings.HasPrefix(k, s) {
					continue keys
				}
			}
			pairs = append(pairs, [2]string{k, f.new + strings.TrimPrefix(k, f.old)})
		}
		if err := iter.Err(); err != nil {
			return 0, fmt.Errorf("upgrade to layout 3: list %s*: %w", f.old, err)
		}
	}
	n := 0
	for _, p := range pairs {
		done, err := renameScript.Run(ctx, r.rdb, []string{p[0], p[1]}).Int()
		if err != nil {
			return n, fmt.Errorf("upgrade to layout 3: rename %s: %w", p[0], err)
		}
		n += done
	}
	if err := r.rdb.Set(ctx, keySchema, 3, 0).Err(); err != nil {
		return n, fmt.Errorf("upgrade to layout 3: record it: %w", err)
	}
	log.Info("store: moved the data to layout 3", "renamed", n)
	return n, nil
}
