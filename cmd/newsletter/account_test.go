package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// TestAccountCreate: `newsletter account create` prints one line, the
// one-time link under NEWSLETTER_BASE_URL, whose token names an invite
// with that role (Redis holds its hash, not the token); bad input prints
// nothing and stores nothing.
func TestAccountCreate(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	env := realEnv(redisURL, "smtp://127.0.0.1:1?tls=none", map[string]string{"NEWSLETTER_BASE_URL": "https://news.example.org"})
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"account"}, args...), getenv, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, bad := range [][]string{
		{"create", "--email", "not an address", "--role", "admin"},
		{"create", "--email", "ann@example.org", "--role", "root"},
		{"create", "--email", "ann@example.org"},
		{"create"},
	} {
		if code, out, _ := cmd(bad...); code == 0 || out != "" {
			t.Errorf("account %v: exit %d, stdout %q", bad, code, out)
		}
	}
	st := store.NewRedis(rdb)
	if list, err := st.ListInvites(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("invites after bad input: %+v %v", list, err)
	}

	code, out, errs := cmd("create", "--email", "Ann@Example.org", "--role", "admin")
	link := strings.TrimSpace(out)
	token, ok := strings.CutPrefix(link, "https://news.example.org"+accounts.InvitePath)
	if code != 0 || !ok || strings.Contains(link, "\n") || !strings.Contains(errs, "ann@example.org") {
		t.Fatalf("account create: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	inv, err := st.InviteByHash(context.Background(), accounts.HashInviteToken(token))
	if err != nil || inv.Email != "ann@example.org" || inv.Role != adminauth.Admin || !strings.HasPrefix(inv.By, "cli") {
		t.Fatalf("the invite: %+v %v", inv, err)
	}
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, token) {
			t.Fatalf("key %q holds the token", k)
		}
	}
	if code, out, _ := cmd("list"); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("account list before anyone accepted: exit %d\n%s", code, out)
	}
}
