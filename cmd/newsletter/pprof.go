package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// pprofHandler serves Go's profiles at /debug/pprof/ behind the admin token
// (NEWSLETTER_PPROF=true): profiling a live worker is how CPU per mail is
// found, and the profiles show code paths an outsider should not see.
func pprofHandler(guard *adminauth.Guard) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return guard.Bearer(mux)
}
