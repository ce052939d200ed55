package bench

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// TB lets a benchmark start the test fakes of internal/testkit, which
// take a testing.TB for their temporary files, their cleanup and their
// complaints. It implements what they call (Helper, Cleanup, TempDir,
// Errorf, Fatal, Fatalf); any other method panics on the nil embedded
// interface, which would show a fake that needs more of it.
type TB struct {
	testing.TB

	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

// NewTB is a TB with nothing to clean up yet.
func NewTB() *TB { return &TB{} }

func (t *TB) Helper() {}

func (t *TB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *TB) TempDir() string {
	dir, err := os.MkdirTemp("", "newsletter-bench")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Warn("remove "+dir, os.RemoveAll(dir)) })
	return dir
}

// Errorf records a complaint (a fake's rejected request): Close returns
// them.
func (t *TB) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}

// Fatal and Fatalf end the benchmark: a fake that cannot start leaves
// nothing to measure.
func (t *TB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"fatal:"}, args...)...)
	os.Exit(1)
}

func (t *TB) Fatalf(format string, args ...any) { t.Fatal(fmt.Sprintf(format, args...)) }

// Close runs the cleanups, last first, and returns the complaints they
// and the run made.
func (t *TB) Close() []string {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.errs
}
