//go:build unix

// Only the unix RefusedAddr holds its port; the other one closes a
// listener and says that another server may be given the port.

package nettest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/nettest"
)

// The address refuses connections, and its port stays held: nothing else
// can listen on it while the test runs. Listening on it directly is what
// fails when the port is free, as after a closed listener; waiting for a
// new server to be handed the port would pass with one.
func TestRefusedAddrStaysRefused(t *testing.T) {
	addr := nettest.RefusedAddr(t)
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("a listener could take the held address %s", addr)
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("a connection to %s was accepted", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}
