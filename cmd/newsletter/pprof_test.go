package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// TestPprofNeedsTheAdminToken: the profiles are there with the token, and
// nothing is without it, or without any token configured.
func TestPprofNeedsTheAdminToken(t *testing.T) {
	srv := httptest.NewServer(pprofHandler(adminauth.New("a-long-admin-token-0123", func(*http.Request) string { return "client" }, nil)))
	defer srv.Close()
	get := func(token string) (int, string) {
		req, err := http.NewRequest("GET", srv.URL+"/debug/pprof/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, body := get("a-long-admin-token-0123"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("with the token: %d %.80q", code, body)
	}
	for _, token := range []string{"", "wrong"} {
		if code, _ := get(token); code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d, want 401", token, code)
		}
	}
	closed := httptest.NewServer(pprofHandler(adminauth.New("", func(*http.Request) string { return "client" }, nil)))
	defer closed.Close()
	resp, err := http.Get(closed.URL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("no admin token configured: %d, want 404", resp.StatusCode)
	}
}
