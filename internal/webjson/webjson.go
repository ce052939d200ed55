// Package webjson writes JSON answers the one way every web package of the
// service does, so a status and its Content-Type never part.
package webjson

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Write answers v as JSON with status code (the API and the console answer
// their JSON through it).
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the status is sent; a client gone mid-body has nothing to hear
}

// Quote shows a value a client gave in an answer: cut at 64 bytes, made
// valid UTF-8, in quotes.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
