// Package httpbody caps request bodies in one place, so a body over its
// route's cap is answered 413 in a way the client can read.
//
// Go's HTTP server answers a client that sent "Expect: 100-continue" with
// "100 Continue" the moment a handler first reads the body. A handler that
// then reads its cap's worth, answers 413 and closes the connection leaves
// the client writing megabytes into a closed socket: it sees a reset, never
// the 413. So a body whose declared Content-Length is over the cap is
// refused before a byte of it is read (no 100 Continue goes out), and only
// a body of unknown length (chunked) is cut while it is read.
package httpbody

import (
	"errors"
	"net/http"
)

// ErrTooLarge is a body over its cap, declared or read.
var ErrTooLarge = errors.New("request body too large")

// Limit caps r's body at max bytes: ErrTooLarge at once, with nothing
// read, when the request declares more; otherwise r.Body is replaced by a
// reader that fails past max bytes (an *http.MaxBytesError, which
// IsTooLarge recognises).
func Limit(w http.ResponseWriter, r *http.Request, max int64) error {
	if r.ContentLength > max {
		return ErrTooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, max)
	return nil
}

// IsTooLarge tells whether err is a body over its cap: Limit's refusal or
// the capped reader's error (possibly wrapped, as ParseForm does).
func IsTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.Is(err, ErrTooLarge) || errors.As(err, &mbe)
}

// ParseMultipartForm parses r's multipart body as r.ParseMultipartForm
// does and returns the function that removes the temporary files its
// parts over maxMemory were written to. net/http removes them only for
// the request it handed to the handler, not for a copy made with
// WithContext, and every request here is such a copy (the request
// timeout): without this, each large upload left a file of up to its
// size in the temporary folder for good (found by the black-box probe).
func ParseMultipartForm(r *http.Request, maxMemory int64) (func(), error) {
	err := r.ParseMultipartForm(maxMemory)
	return func() {
		if r.MultipartForm != nil {
			// A file that cannot be removed is already gone or in use by
			// nothing of ours; there is no caller to tell.
			_ = r.MultipartForm.RemoveAll()
		}
	}, err
}
