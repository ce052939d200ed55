package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/feedback"
)

// expectContinue sends the head of a POST that declares a body of size
// bytes and asks "Expect: 100-continue", as curl does for large bodies,
// then reads the first answer's status: 413 must come before any
// "100 Continue", or the client sends the body into a connection we are
// closing and never sees the 413. Nothing of the body is sent.
func expectContinue(t *testing.T, addr, path, contentType string, size int64, header ...string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A deadline on the read only: a server that waits for the body
	// fails the test instead of hanging it.
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: " + contentType +
		"\r\nContent-Length: " + strconv.FormatInt(size, 10) + "\r\nExpect: 100-continue\r\n"
	for _, h := range header {
		head += h + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := textproto.NewReader(bufio.NewReader(conn)).ReadLine()
	if err != nil {
		t.Fatalf("%s: no answer to the head: %v", path, err)
	}
	_, status, _ := strings.Cut(line, " ")
	code, err := strconv.Atoi(strings.SplitN(status, " ", 2)[0])
	if err != nil {
		t.Fatalf("%s: status line %q", path, line)
	}
	return code
}

// chunked posts size bytes of body without a declared length: one
// endless field, which reads as a well-formed start of a body of its kind.
func chunked(t *testing.T, url, contentType, field string, size int64, header ...string) int {
	t.Helper()
	start := field + "="
	if contentType == "application/json" {
		start = `{"` + field + `":"`
	}
	req, _ := http.NewRequest("POST", url, io.MultiReader(strings.NewReader(start), io.LimitReader(neverEnding('a'), size)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", contentType)
	for _, h := range header {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestBodyOverCapIs413BeforeContinue: every route that reads a capped
// body answers a declared length over its cap with 413 and no
// 100 Continue, and a chunked body over the cap with 413 too.
func TestBodyOverCapIs413BeforeContinue(t *testing.T) {
	e := newEnvWithProviders(t, Config{AdminToken: feedbackAdmin, VAPIDPublicKey: "BKey"}, map[string]feedback.ProviderWebhook{"postmark": &feedback.Postmark{Token: "postmark-token-0123456789"}}, func(d *Deps) {
	})
	addr := e.srv.Listener.Addr().String()
	const big = 2 << 20
	bearer := "Authorization: Bearer " + feedbackAdmin
	for _, c := range []struct {
		path, ct, field string
		header          []string
	}{
		{"/subscribe", formCT, "email", nil},
		{"/subscribe", "application/json", "email", nil},
		{"/confirm", formCT, "token", nil},
		{"/unsubscribe", formCT, "email", nil},
		{"/preferences", formCT, "token", nil},
		{"/preferences/push", "application/json", "token", nil},
		{"/api/items", "application/json", "title", []string{bearer}},
		{"/webhooks/postmark", "application/json", "Type", nil},
		{"/webhooks/bounce", "application/json", "email", []string{bearer}},
	} {
		if code := expectContinue(t, addr, c.path, c.ct, big, c.header...); code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s (%s) declaring %d bytes: first answer %d, want 413", c.path, c.ct, big, code)
		}
		if code := chunked(t, e.srv.URL+c.path, c.ct, c.field, big, c.header...); code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s (%s) chunked %d bytes: %d, want 413", c.path, c.ct, big, code)
		}
	}
	// A body within the cap still gets its 100 Continue and is read.
	if code := expectContinue(t, addr, "/subscribe", formCT, 100); code != http.StatusContinue {
		t.Errorf("a small body: first answer %d, want 100", code)
	}
}
