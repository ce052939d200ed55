// Package redistest gives tests a Redis: the server named by
// NEWSLETTER_TEST_REDIS_URL on a database number of the caller's choosing, or
// an embedded miniredis when the variable is unset, so `make test` passes on
// a machine with nothing but Go.
//
// asynq's keys have no prefix option, and `go test ./...` runs packages in
// parallel, so each package passes its own db number; New flushes the
// database at the start of every test that asks for it, so tests of one
// package that take New must not run in parallel with each other.
//
// Own is for tests that should run in parallel: it gives the test a Redis
// no other test uses (a redis-server of its own when the variable is set
// and redis-server is on the PATH, the embedded miniredis when the
// variable is unset) and calls t.Parallel; with the variable set and no
// redis-server it falls back to New's shared database, and the test runs
// alone, as before.
package redistest

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/embedded"
)

// EnvURL names the variable that points tests at a real Redis.
const EnvURL = "NEWSLETTER_TEST_REDIS_URL"

// DB numbers reserved per package. Each package that talks to Redis takes
// one, so packages tested in parallel never see each other's keys. The
// benchmarks use db 15 (bench), above every number here, when run by
// hand; their smoke run in the tests takes DBBench.
const (
	DBStore = 1 + iota
	DBTasks
	DBAPI
	DBCommand
	DBImport // internal/csvimport
	DBEngage // internal/engage
	DBPace
	DBAutopipe
	DBWorker
	DBFeedback
	DBConsole
	DBDeploy
	DBRedisFault
	DBIssues
)

// DBInbox is channels/inbox's database: its tests take Own, as
// services/webhooks' do (DBWebhooks).
const DBInbox = DBTasks

// DBWebhooks is services/webhooks' database. Its tests take Own, a
// redis-server of their own; the number matters only on a machine with
// NEWSLETTER_TEST_REDIS_URL set and no redis-server, where Own falls
// back to the shared Redis. Sixteen databases are all a Redis has, and
// every other number is taken, so it shares the tasks package's there:
// on such a machine run the two packages apart (go test -p 1).
const DBWebhooks = DBTasks

// DBBench is the benchmarks' smoke run (package bench): db 0, below the
// numbers above, and not 15, the benchmarks' own when run by hand (`make
// bench-*` against the test Redis beside `make test` would otherwise
// flush each other's data).
const DBBench = 0

// New returns a client on an empty database and the URL that reaches it
// (for subprocesses). The client is closed when the test ends.
func New(t testing.TB, db int) (*redis.Client, string) {
	t.Helper()
	opt, url := options(t, db)
	c := redis.NewClient(opt)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("redistest: close: %v", err)
		}
	})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("redistest: flush db %d: %v", db, err)
	}
	return c, url
}

func options(t testing.TB, db int) (*redis.Options, string) {
	raw := os.Getenv(EnvURL)
	if raw == "" {
		m, err := embedded.Start("")
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		t.Cleanup(m.Close)
		return &redis.Options{Addr: m.Addr()}, m.URL()
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("redistest: %s=%q: %v", EnvURL, raw, err)
	}
	opt.DB = db
	u := *opt
	scheme := "redis"
	if opt.TLSConfig != nil {
		scheme = "rediss"
	}
	auth := ""
	if u.Password != "" {
		auth = u.Username + ":" + u.Password + "@"
	}
	return opt, scheme + "://" + auth + u.Addr + "/" + strconv.Itoa(db)
}
