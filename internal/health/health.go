// Package health serves the orchestrator's probes: /healthz (the process
// answers) and /readyz (its Redis answers within a budget). Every role
// mounts the same two handlers.
package health

import (
	"context"
	"io"
	"net/http"
	"time"
)

// ReadyBudget is how long /readyz waits for Redis before it answers 503.
const ReadyBudget = 2 * time.Second

// Pinger reports whether a dependency is reachable (store.Subscribers).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Mux is where Register puts the probes (an *http.ServeMux, or one that
// records its routes).
type Mux interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register mounts GET /healthz and GET /readyz on mux.
func Register(mux Mux, p Pinger) {
	mux.HandleFunc("GET /healthz", live)
	mux.Handle("GET /readyz", Ready(p, ReadyBudget))
}

func live(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok\n") // the client left: nothing to tell
}

// Ready answers 200 when p answers within budget, else 503.
func Ready(p Pinger, budget time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), budget)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			http.Error(w, "redis unreachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}
