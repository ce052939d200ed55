package inbox

import (
	"net"
	"testing"
)

// TestPeerGone: a detached stream's heartbeat tells a client that closed
// its end from one that is idle, without waiting on either.
func TestPeerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if peerGone(server) {
		t.Fatal("an idle client counted as gone")
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	gone := false
	for range 100 { // the FIN takes a moment to arrive
		if gone = peerGone(server); gone {
			break
		}
	}
	if !gone {
		t.Error("a closed client still counted as there")
	}
}
