package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every listener bounds a request's headers (the attacker's probe of
// issue #41: a megabyte of headers a connection, never finished, held
// about 1.8 MB of the process each): a request within maxHeaderBytes is
// served, one past it answered 431 without reaching the handler.
func TestHeadersAreBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	go func() { _ = srv.Serve(ln) }() // ends with Close
	t.Cleanup(func() { _ = srv.Close() })
	status := func(headerBytes int) int {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		filler := strings.Repeat("a", 1000)
		var req strings.Builder
		req.WriteString("GET /healthz HTTP/1.1\r\nHost: x\r\n")
		for i := 0; req.Len() < headerBytes; i++ {
			fmt.Fprintf(&req, "X-Filler-%d: %s\r\n", i, filler)
		}
		req.WriteString("\r\n")
		if _, err := c.Write([]byte(req.String())); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if code := status(16 << 10); code != http.StatusOK || served.Load() != 1 {
		t.Fatalf("16 KiB of headers: %d (served %d), want 200", code, served.Load())
	}
	if code := status(maxHeaderBytes + 8<<10); code != http.StatusRequestHeaderFieldsTooLarge || served.Load() != 1 {
		t.Fatalf("%d bytes of headers: %d (served %d), want 431 and the handler not reached", maxHeaderBytes+8<<10, code, served.Load())
	}
}
