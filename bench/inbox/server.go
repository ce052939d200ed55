package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/inbox"
	"github.com/newsletter/newsletter/internal/redisconn"
)

// serverJob is the server child's: the Redis, the address it listens on,
// the open files it needs.
type serverJob struct {
	RedisURL string
	Addr     string
	FDs      int
}

// numbered is the server's People: u<N>@example.com is person N; no
// store is read, so what the streams cost is the inbox's alone.
type numbered struct{}

func (numbered) ByEmail(_ context.Context, email string) (channels.Person, error) {
	local, ok := strings.CutSuffix(email, "@example.com")
	if id, err := strconv.ParseInt(strings.TrimPrefix(local, "u"), 10, 64); ok && err == nil && id > 0 {
		return channels.Person{ID: id, Email: email}, nil
	}
	return channels.Person{}, channels.ErrNoPerson
}

// serve is the server child: the inbox's routes under /inbox, as the API
// role mounts them (its server's bounds: cmd/newsletter newHTTPServer),
// and GET /bench/mem, its memory after a GC.
func serve(job serverJob) error {
	if _, err := raiseFDs(job.FDs); err != nil {
		return err
	}
	// The API role's Redis client (its pool, RESP2, context deadlines).
	opt, err := asynq.ParseRedisURI(job.RedisURL)
	if err != nil {
		return err
	}
	rdb, err := redisconn.Client(opt, 0)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	warned := &warnings{n: map[string]int{}}
	// The default bound on streams (NEWSLETTER_INBOX_STREAMS, 20,000).
	c := inbox.NewWith(inbox.Config{Secret: []byte(secret)}, channels.Env{Redis: rdb, People: numbered{}, Log: slog.New(warned)})
	defer c.CloseStreams()
	mux := http.NewServeMux()
	h := http.StripPrefix("/inbox", c.Handler())
	mux.Handle("/inbox/", h)
	mux.HandleFunc("GET /bench/mem", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m := memAnswer{Heap: int64(ms.HeapInuse), Stack: int64(ms.StackInuse), Goroutines: runtime.NumGoroutine(), Open: c.OpenStreams(), Warnings: warned.counts()}
		if err := json.NewEncoder(w).Encode(m); err != nil {
			return // the harness went away
		}
	})
	// What the streams hold, for a look at where their memory goes:
	// go tool pprof http://<addr>/debug/pprof/heap while they are open.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, MaxHeaderBytes: 32 << 10}
	ln, err := net.Listen("tcp", job.Addr)
	if err != nil {
		return err
	}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			bench.Warn("serve", err)
		}
	}()
	err = bench.ChildRun(func() (any, error) { return nil, nil })
	c.CloseStreams()
	bench.Warn("close the server", srv.Close())
	return err
}

// warnings counts the inbox's warnings by message (a stream's failed read
// of its log waits for its heartbeat: the harness says so).
type warnings struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			msg += ": " + a.Value.String()
		}
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[msg]++
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.n)
}
