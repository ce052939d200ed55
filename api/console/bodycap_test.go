package console_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConsoleBodyOverCapIs413BeforeContinue: the console's forms and the
// import's upload answer a declared body over their cap with 413 before
// any "100 Continue", so the browser or curl sees the 413 instead of a
// connection reset in the middle of its upload.
func TestConsoleBodyOverCapIs413BeforeContinue(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	u, _ := url.Parse(e.srv.URL + "/admin/")
	var cookies []string
	for _, c := range b.c.Jar.Cookies(u) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	const big = 40 << 20 // over the upload's default 32 MB, and every form's cap
	for _, c := range []struct{ path, ct string }{
		{"/admin/login", "application/x-www-form-urlencoded"},
		{"/admin/items", "application/x-www-form-urlencoded"},
		{"/admin/issues", "application/x-www-form-urlencoded"},
		{"/admin/import", "multipart/form-data; boundary=xyz"},
	} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		// A deadline on the answer: a server waiting for the body fails
		// the test rather than hanging it.
		if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		head := "POST " + c.path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: " + c.ct +
			"\r\nContent-Length: " + strconv.Itoa(big) + "\r\nExpect: 100-continue\r\nSec-Fetch-Site: same-origin\r\nOrigin: " + e.srv.URL +
			"\r\nCookie: " + strings.Join(cookies, "; ") + "\r\n\r\n"
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		line, err := textproto.NewReader(bufio.NewReader(conn)).ReadLine()
		_ = conn.Close() // the test is done with it either way
		if err != nil {
			t.Fatalf("%s: no answer to the head: %v", c.path, err)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 "+strconv.Itoa(http.StatusRequestEntityTooLarge)+" ") {
			t.Errorf("POST %s declaring %d bytes: first answer %q, want 413", c.path, big, line)
		}
	}
}
