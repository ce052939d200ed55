package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/internal/autopipe"
)

// enqueueOnly serves POST /subscribe as the thinnest API that still enqueues
// a task per request: it reads the body, enqueues one confirmation through
// asynq's client and answers 202. No validation, no store write, no outbox.
// Its Redis client is set up like the API's (RESP2, autopipe). Measured next
// to the real endpoint, it shows how much of the gap to raw enqueue is the
// HTTP exchange itself, which no signup handler can avoid.
type enqueueOnly struct {
	URL           string
	srv           *http.Server
	hook          *autopipe.Hook
	exec, batched *redis.Client
}

func startEnqueueOnly(redisURL string) (*enqueueOnly, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	opt.Protocol = 2
	exec, batched := redis.NewClient(opt), redis.NewClient(opt)
	hook := autopipe.New(exec, 4)
	batched.AddHook(hook)
	client := asynq.NewClientFromRedisClient(batched)

	payload := []byte(`{"email":"someone@example.com","nonce":"0123456789abcdef"}`)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var seq atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subscribe", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := "confirm:ceiling-" + run + "-" + strconv.FormatInt(seq.Add(1), 10)
		_, err := client.EnqueueContext(r.Context(), asynq.NewTask("email:confirm", payload),
			asynq.Queue("transactional"), asynq.TaskID(id))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &enqueueOnly{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: mux}, hook: hook, exec: exec, batched: batched}
	go func() { _ = e.srv.Serve(l) }() // returns when Close shuts it down
	return e, nil
}

func (e *enqueueOnly) Close() {
	bench.Warn("shut down enqueue-only server", e.srv.Shutdown(context.Background()))
	e.hook.Close()
	bench.Warn("close batched client", e.batched.Close())
	bench.Warn("close client", e.exec.Close())
}
