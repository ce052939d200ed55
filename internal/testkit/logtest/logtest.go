// Package logtest holds what tests need to read a log that the code
// under test writes from its own goroutines.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a log's output that a test reads while other goroutines
// write it: Write and String take one lock.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
