//go:build !unix

package nettest

import (
	"net"
	"testing"
)

// RefusedAddr returns an address where nothing listens. Without the
// sockets API of unix it closes a listener, so another server may be
// given the port later in the test (see the package doc).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("nettest: listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("nettest: close: %v", err)
	}
	return addr
}
