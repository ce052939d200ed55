package form

import "net/http"

// Empty reads a form that carries nothing but its button (pause, lift,
// erase…): the body is bounded and read, so nothing is left unread.
func Empty(w http.ResponseWriter, r *http.Request) error { return parse(w, r, MaxForm) }
