//go:build unix

package nettest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr returns "127.0.0.1:port" where nothing listens and nothing
// else can start to while the test runs: the port is held by a socket
// that is bound but never listens, so a connection to it is refused (RST)
// and no other socket is given it.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("nettest: socket: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Close(fd); err != nil {
			t.Errorf("nettest: close the held socket: %v", err)
		}
	})
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("nettest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("nettest: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("nettest: bound to %T, want an IPv4 address", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
