// Package poll lets a test wait for something that happens in the
// background (a mail arriving, a task finishing, a claim expiring) by
// checking it every few milliseconds until a deadline, instead of sleeping
// and hoping.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// interval is how often a condition is checked.
const interval = 10 * time.Millisecond

// BusyMachine is the deadline of a wait for background work in a test that
// runs the service, a worker or asynq for real (a mail arriving, a task
// done, a process listening): long enough for a 2-core machine busy with
// the race detector, other tests and other work (`make test-stress` runs
// the suite beside two CPU-bound loops). It bounds a wait and says
// nothing about speed: a passing test never waits it out, and a failing
// one reports what it still waited for.
const BusyMachine = 2 * time.Minute

// Until checks cond until it returns nil; after timeout the test fails with
// cond's last error, which should say what was seen instead.
func Until(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// True is Until for a yes/no condition; what names it in the failure.
func True(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	Until(t, timeout, func() error {
		if ok() {
			return nil
		}
		return fmt.Errorf("still waiting for %s", what)
	})
}
