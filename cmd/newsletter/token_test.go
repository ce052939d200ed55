package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// TestTokenCommands: a token made by `newsletter token create` opens the
// API with its role and no more, without NEWSLETTER_ADMIN_TOKEN; Redis
// holds its hash, never the token; `list` shows it without the token;
// `revoke` ends it at the next request; /monitoring/ takes only admins.
func TestTokenCommands(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	env := realEnv(redisURL, "smtp://127.0.0.1:1?tls=none", nil)
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"token"}, args...), getenv, &out, &errb)
		return code, out.String(), errb.String()
	}
	create := func(name, role string) string {
		t.Helper()
		code, out, errs := cmd("create", "--name", name, "--role", role)
		tok := strings.TrimSpace(out)
		if code != 0 || adminauth.CheckToken(tok) != nil || strings.Contains(tok, "\n") {
			t.Fatalf("token create %s: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
		return tok
	}
	editor, viewer := create("ann", "editor"), create("ci-reader", "viewer")

	// Bad input changes nothing.
	for _, bad := range [][]string{
		{"create", "--name", "ann", "--role", "admin"},        // the name is taken
		{"create", "--name", "bob", "--role", "root"},         // no such role
		{"create", "--name", "two words", "--role", "viewer"}, // not a name
		{"create", "--name", "admin-token", "--role", "admin"},
		{"revoke", "nobody"},
	} {
		if code, out, _ := cmd(bad...); code == 0 || out != "" {
			t.Errorf("token %v: exit %d, stdout %q", bad, code, out)
		}
	}

	code, out, _ := cmd("list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "ann ") || !strings.Contains(lines[1], "editor") ||
		!strings.Contains(lines[2], "viewer") || strings.Contains(out, editor) || strings.Contains(out, viewer) {
		t.Fatalf("token list: exit %d\n%s", code, out)
	}
	// Redis holds the hash, not the token.
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		// Read by type, not DUMP: miniredis (make test without a Redis)
		// dumps strings only.
		var v any
		switch typ := rdb.Type(context.Background(), k).Val(); typ {
		case "string":
			v, err = rdb.Get(context.Background(), k).Result()
		case "hash":
			v, err = rdb.HGetAll(context.Background(), k).Result()
		case "set":
			v, err = rdb.SMembers(context.Background(), k).Result()
		case "zset":
			v, err = rdb.ZRange(context.Background(), k, 0, -1).Result()
		case "list":
			v, err = rdb.LRange(context.Background(), k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(context.Background(), k, "-", "+").Result()
		default:
			t.Fatalf("key %s: type %q not read", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		dump := fmt.Sprint(v)
		if strings.Contains(dump, editor) || strings.Contains(dump, viewer) {
			t.Fatalf("key %s holds a token in clear", k)
		}
	}

	svc := startService(t, env, "api")
	call := func(method, path, tok string) int {
		req, _ := http.NewRequest(method, svc.base+path, strings.NewReader(`{"title":"T","url":"https://example.com/t"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		return statusOf(t, req)
	}
	if c := call("POST", "/api/items", editor); c != http.StatusCreated {
		t.Fatalf("an editor adds an item: %d, want 201", c)
	}
	if c := call("POST", "/api/items", viewer); c != http.StatusForbidden {
		t.Fatalf("a viewer adds an item: %d, want 403", c)
	}
	if c := call("GET", "/api/digests/2026-W01", viewer); c == http.StatusUnauthorized || c == http.StatusForbidden {
		t.Fatalf("a viewer reads a digest run: %d", c)
	}
	mon, _ := http.NewRequest("GET", svc.base+"/monitoring/", nil)
	mon.SetBasicAuth("admin", editor)
	if c := statusOf(t, mon); c != http.StatusForbidden {
		t.Fatalf("an editor on /monitoring/: %d, want 403", c)
	}

	if code, out, errs := cmd("revoke", "ann"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("token revoke: exit %d %q %q", code, out, errs)
	}
	if c := call("POST", "/api/items", editor); c != http.StatusUnauthorized {
		t.Fatalf("a revoked token at the next request: %d, want 401", c)
	}
	if code, out, _ := cmd("list"); code != 0 || strings.Contains(out, "ann") {
		t.Fatalf("token list after revoke: %d\n%s", code, out)
	}

	// The audit log has the commands' changes, by the person who ran
	// them, and the API's, by the token's name.
	entries, err := store.NewRedis(rdb).AuditEntries(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Actor, "cli") && e.Actor != "ann" {
			t.Errorf("entry %+v: actor not the command's user or the token's name", e)
		}
		got = append(got, e.Actor+" "+e.Action+" "+e.Target+" "+e.Detail)
	}
	want := []string{"token.revoked token:ann ", "item.added item:1 ", "token.created token:ci-reader viewer", "token.created token:ann editor"}
	if len(got) != len(want) {
		t.Fatalf("audit entries:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Fatalf("audit entries:\n%s\nwant endings %q", strings.Join(got, "\n"), want)
		}
	}
}
