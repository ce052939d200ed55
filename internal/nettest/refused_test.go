package nettest_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/nettest"
)

// The address refuses connections, and servers started after it are
// never given its port.
func TestRefusedAddrStaysRefused(t *testing.T) {
	addr := nettest.RefusedAddr(t)
	for range 50 {
		srv := httptest.NewServer(http.NotFoundHandler())
		if srv.Listener.Addr().String() == addr {
			t.Fatalf("a new server was given the held address %s", addr)
		}
		srv.Close()
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
