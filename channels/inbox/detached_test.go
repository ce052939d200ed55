package inbox

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
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

// TestReloadFindsRoom: a person's streams whose clients went away (a
// page reloaded as often as the cap) are found when they open another,
// not only at their heartbeat, so the new one is not refused.
func TestReloadFindsRoom(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	srv := newTestServer(t, c)
	for range MaxStreamsPerPerson {
		events, stop := openStream(t, srv, ana, "")
		next(t, events, "count")
		stop()
		for range events { // until the client's end is closed
		}
	}
	hash, _ := Hash([]byte(testSecret), ana.Email)
	u := srv.URL + "/stream?" + url.Values{"subscriber": {ana.Email}, "hash": {hash}}.Encode()
	for try := 0; ; try++ {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		code := resp.StatusCode
		cancel()
		resp.Body.Close()
		if code == http.StatusOK {
			return
		}
		if try == 20 { // the FINs take a moment to reach the server
			t.Fatalf("a stream after %d closed ones: %d", MaxStreamsPerPerson, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
