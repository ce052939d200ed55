package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

const settingsAdmin = "settings-admin-token-0123"

// settingsProcess is one process (an API, or a worker's cache) over a
// shared store.
type settingsProcess struct {
	srv   *httptest.Server
	cache *settings.Cache
}

func newSettingsProcess(t *testing.T, st *store.Redis, requirePostal bool) settingsProcess {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := settings.NewCache(st, settings.Options{Defaults: settings.Defaults("Example News <news@example.com>"),
		Recheck: 10 * time.Millisecond, RequirePostal: requirePostal, Log: log})
	s := api.New(api.Config{AdminToken: settingsAdmin, DKIMDomain: "example.com", Origin: "https://news.example.com"},
		api.Deps{Store: st, SettingsStore: st, Settings: cache, Log: log, Queue: nil,
			Audit: audit.NewTrail(st, logredact.New([]byte("settings-secret")), log, nil), AuditLog: st})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return settingsProcess{srv: srv, cache: cache}
}

func sendJSON(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+settingsAdmin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func readSettings(t *testing.T, p settingsProcess) store.Settings {
	t.Helper()
	code, body := sendJSON(t, "GET", p.srv.URL+"/api/settings", "")
	var s store.Settings
	if code != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("GET /api/settings: %d %s", code, body)
	}
	return s
}

// TestSettingsAPI: the environment's settings first; bad input is a 400
// that changes nothing; a save is audited and its version moves; a save
// over a later version is a 409; another process over the same Redis
// shows the change without a restart.
func TestSettingsAPI(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	one, two := newSettingsProcess(t, st, false), newSettingsProcess(t, st, false)
	ctx := context.Background()

	if s := readSettings(t, one); s.Version != 0 || s.Name != "Example News" || s.From != "Example News <news@example.com>" {
		t.Fatalf("before any save, the environment's: %+v", s)
	}
	for name, body := range map[string]string{
		"control character in the name":   `{"name":"Bad\u0007name"}`,
		"line break in the name":          `{"name":"Two\nlines"}`,
		"control character in the postal": `{"postal_address":"Street 1\u0000"}`,
		"From outside the DKIM domain":    `{"from":"News <news@elsewhere.org>"}`,
		"From at a public suffix":         `{"from":"news@com"}`,
		"not an address":                  `{"from":"nobody"}`,
		"colour not #rrggbb":              `{"accent":"red"}`,
		"short colour":                    `{"accent":"#fff"}`,
		"logo over http":                  `{"logo_url":"http://example.com/logo.png"}`,
		"logo as javascript":              `{"logo_url":"javascript:alert(1)"}`,
		"over-long name":                  `{"name":"` + strings.Repeat("n", settings.MaxName+1) + `"}`,
		"over-long description":           `{"description":"` + strings.Repeat("d", settings.MaxDescription+1) + `"}`,
		"empty name":                      `{"name":"  "}`,
		"unknown field":                   `{"colour":"#ffffff"}`,
	} {
		if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, code, body)
		}
	}
	if v, err := st.SettingsVersion(ctx); err != nil || v != 0 {
		t.Fatalf("refused saves wrote version %d, %v", v, err)
	}

	code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", `{"version":0,"name":"Café Weekly","description":"Coffee, weekly.",
		"from":"Café Weekly <weekly@news.example.com>","reply_to":"editor@example.com","postal_address":"1 Bean Street\nRoastville",
		"logo_url":"https://example.com/logo.png","accent":"#AA3300"}`)
	var saved store.Settings
	if code != http.StatusOK || json.Unmarshal([]byte(body), &saved) != nil || saved.Version != 1 || saved.Accent != "#aa3300" ||
		saved.PostalAddress != "1 Bean Street\nRoastville" {
		t.Fatalf("save: %d %s", code, body)
	}
	if got := readSettings(t, one); !reflect.DeepEqual(got, saved) {
		t.Fatalf("read back %+v, want %+v", got, saved)
	}
	// The process that saved uses them at once.
	if got := one.cache.Current(ctx); got.Name != "Café Weekly" {
		t.Fatalf("the saving process still has %+v", got)
	}
	// A writer who read version 0 is refused, and nothing changes.
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", `{"version":0,"name":"Overwritten"}`); code != http.StatusConflict {
		t.Fatalf("stale save: %d %s, want 409", code, body)
	}
	if got := readSettings(t, one); !reflect.DeepEqual(got, saved) {
		t.Fatalf("after a stale save %+v, want %+v", got, saved)
	}
	// Without a version, a save goes over the current one.
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", `{"description":"Coffee, every Monday."}`); code != http.StatusOK ||
		!strings.Contains(body, `"version":2`) || !strings.Contains(body, `"name":"Café Weekly"`) {
		t.Fatalf("partial save: %d %s", code, body)
	}

	// Audited: the fields that changed, never their values.
	entries, err := st.AuditEntries(ctx, "", 10)
	if err != nil || len(entries) != 2 || entries[0].Action != audit.SettingsChanged || entries[0].Detail != "description" ||
		!strings.Contains(entries[1].Detail, "postal_address") || strings.Contains(entries[1].Detail, "Bean") {
		t.Fatalf("audit: %+v %v", entries, err)
	}

	// The second process sees the change without a restart: its form
	// page names the newsletter.
	poll.Until(t, 10*time.Second, func() error {
		_, page := get(t, two.srv.URL+"/")
		if !strings.Contains(page, "Subscribe to Café Weekly") || !strings.Contains(page, "Coffee, every Monday.") ||
			!strings.Contains(page, "<title>Subscribe · Café Weekly</title>") ||
			// The logo, and the accent colour on the page's buttons and links.
			!strings.Contains(page, `<img class="nl-logo brand" src="https://example.com/logo.png" alt="Café Weekly">`) ||
			!strings.Contains(page, `<body style="--accent:#aa3300">`) {
			return fmt.Errorf("the second process's form: %.300s", page)
		}
		return nil
	})
}

// TestBulkSendNeedsPostalAddress: with NEWSLETTER_REQUIRE_POSTAL_ADDRESS
// on, a digest run is refused (409, the reason named) until a postal
// address is saved.
func TestBulkSendNeedsPostalAddress(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	p := newSettingsProcess(t, st, true)
	code, body := sendJSON(t, "POST", p.srv.URL+"/api/digest/run", `{"period":"2026-W10"}`)
	if code != http.StatusConflict || !strings.Contains(body, "postal address") {
		t.Fatalf("a digest without a postal address: %d %s, want 409", code, body)
	}
	if err := p.cache.BulkReady(context.Background()); err != settings.ErrNoPostalAddress {
		t.Fatalf("BulkReady: %v", err)
	}
	if code, body := sendJSON(t, "PUT", p.srv.URL+"/api/settings", `{"postal_address":"1 Bean Street, Roastville"}`); code != http.StatusOK {
		t.Fatalf("save: %d %s", code, body)
	}
	if err := p.cache.BulkReady(context.Background()); err != nil {
		t.Fatalf("BulkReady with a postal address: %v", err)
	}
}
