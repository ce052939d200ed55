package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestRightTokenAfterTenWrongOnes: a neighbour behind the same address
// (a NAT, a proxy not listed as trusted) who sends ten wrong tokens, to
// the API and to /monitoring/ alike, does not lock the operator out: the
// right token still passes on both.
func TestRightTokenAfterTenWrongOnes(t *testing.T) {
	const token = "guard-admin-token-0123"
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	svc := startService(t, realEnv(redisURL, "smtp://127.0.0.1:1?tls=none", map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": token,
	}), "api")
	api := func(tok string) int {
		req, _ := http.NewRequest("GET", svc.base+"/api/subscribers/nobody@example.com", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return statusOf(t, req)
	}
	monitoring := func(pass string) int {
		req, _ := http.NewRequest("GET", svc.base+"/monitoring/", nil)
		req.SetBasicAuth("admin", pass)
		return statusOf(t, req)
	}
	// Five wrong ones on each route: the guard counts them together.
	for i := 0; i < 5; i++ {
		if c := api("wrong-token-" + string(rune('a'+i))); c != http.StatusUnauthorized {
			t.Fatalf("wrong Bearer token %d: %d, want 401", i+1, c)
		}
		if c := monitoring("wrong-password"); c != http.StatusUnauthorized {
			t.Fatalf("wrong Basic password %d: %d, want 401", i+1, c)
		}
	}
	if c := api(token); c != http.StatusNotFound { // the guard let it through to the handler
		t.Fatalf("the right token after ten wrong ones from this address: %d, want the API's 404", c)
	}
	if c := monitoring(token); c != http.StatusOK {
		t.Fatalf("/monitoring/ with the right password after ten wrong ones: %d, want 200", c)
	}
}

func statusOf(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // only the status is read
	return resp.StatusCode
}

// TestWeakAdminTokenStopsStartUp: sixteen characters of one kind are
// refused at start-up, with one line naming the variable.
func TestWeakAdminTokenStopsStartUp(t *testing.T) {
	env := map[string]string{
		"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:1/0", "NEWSLETTER_SECRET": "integration-test-secret",
		"NEWSLETTER_SMTP_URL": "smtp://127.0.0.1:1?tls=none", "NEWSLETTER_ADMIN_TOKEN": "aaaaaaaaaaaaaaaa",
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &out, &errb)
	var named []string
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.Contains(l, "NEWSLETTER_") {
			named = append(named, l)
		}
	}
	if code != 1 || len(named) != 1 || !strings.HasPrefix(named[0], "NEWSLETTER_ADMIN_TOKEN: ") {
		t.Fatalf("a weak admin token: exit %d, lines naming variables %q:\n%s", code, named, errb.String())
	}
}

// TestEmbeddedBannerOnLoopback: embedded mode listens on 127.0.0.1:8080 by
// default; the banner shows the URLs it is reached at (localhost, as the
// links in mails say), with no second "links in mails" line.
func TestEmbeddedBannerOnLoopback(t *testing.T) {
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:8080" {
		t.Fatalf("embedded mode listens on %q, want 127.0.0.1:8080", cfg.Addr)
	}
	var out bytes.Buffer
	a := &app{cfg: cfg, out: &out}
	a.banner(roles{api: true, worker: true, scheduler: true}, cfg.Addr, cfg.Addr, true)
	for _, want := range []string{"listening on 127.0.0.1:8080", "signup form      http://localhost:8080/", "dev mailbox      http://localhost:8080/dev/mailbox", "metrics          http://localhost:8080/metrics",
		"first account    bin/newsletter account create --email you@example.org --role admin"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "links in mails") {
		t.Errorf("the banner names the same place twice:\n%s", out.String())
	}
	// Told to listen elsewhere, it shows that place.
	out.Reset()
	a.banner(roles{api: true}, "127.0.0.1:9000", "10.0.0.5:9090", false)
	for _, want := range []string{"signup form      http://127.0.0.1:9000/", "links in mails   http://localhost:8080", "metrics          http://10.0.0.5:9090/metrics"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
}
