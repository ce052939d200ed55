package netguard

import (
	"fmt"
	"io"
)

// ReadLimited reads at most max bytes of an answer and drains (up to a
// bound) and drops the rest, so a huge or endless answer from an endpoint
// costs neither memory nor a stuck goroutine.
func ReadLimited(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max))
	if err != nil {
		return b, fmt.Errorf("read answer: %w", err)
	}
	// Drain a little more so the connection can be reused; past that,
	// closing the body drops the connection. A failure here costs only the
	// connection's reuse, and the part we keep was read whole.
	_, _ = io.CopyN(io.Discard, r, 64<<10)
	return b, nil
}
