package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMonitoringAuthAndCSRF(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	var hits int
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++; io.WriteString(w, "asynqmon") })
	srv := New(Config{AdminToken: "s3cret"}, Deps{Store: e.store})
	srv.Handle("/monitoring/", srv.Monitoring(ui, "https://news.example.com"))
	do := func(method, user, pass string, headers map[string]string) int {
		r := httptest.NewRequest(method, "https://news.example.com/monitoring/api/queues/default/pause", nil)
		if user != "" || pass != "" {
			r.SetBasicAuth(user, pass)
		}
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w.Code
	}
	if c := do("GET", "", "", nil); c != 401 {
		t.Fatalf("no credentials: %d", c)
	}
	if c := do("GET", "admin", "wrong", nil); c != 401 {
		t.Fatalf("wrong password: %d", c)
	}
	if c := do("GET", "admin", "s3cret", nil); c != 200 {
		t.Fatalf("with the token: %d", c)
	}
	before := hits
	for name, h := range map[string]map[string]string{
		"foreign origin":  {"Origin": "https://evil.example"},
		"foreign referer": {"Referer": "https://evil.example/page"},
		"no origin":       nil,
	} {
		if c := do("POST", "admin", "s3cret", h); c != 403 {
			t.Errorf("POST with %s: %d, want 403", name, c)
		}
	}
	if hits != before {
		t.Fatal("a refused request reached asynqmon")
	}
	if c := do("POST", "admin", "s3cret", map[string]string{"Origin": "https://news.example.com"}); c != 200 {
		t.Fatalf("POST from our own origin: %d", c)
	}
	if c := do("DELETE", "admin", "s3cret", map[string]string{"Referer": "https://news.example.com/monitoring/queues"}); c != 200 {
		t.Fatalf("DELETE with our referer: %d", c)
	}

	closed := New(Config{}, Deps{Store: e.store})
	closed.Handle("/monitoring/", closed.Monitoring(ui, "https://news.example.com"))
	r := httptest.NewRequest("GET", "/monitoring/", nil)
	r.SetBasicAuth("admin", "")
	w := httptest.NewRecorder()
	closed.ServeHTTP(w, r)
	if w.Code != 404 {
		t.Fatalf("monitoring without an admin token: %d, want 404", w.Code)
	}
}
