package console_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// concurrently runs n sign-ins at once, each from its own client, and
// answers their pages in order.
func (e *env) concurrently(t *testing.T, n int, signIn func(i int, b *browser) page) []page {
	t.Helper()
	pages := make([]page, n)
	var wg sync.WaitGroup
	for i := range n {
		b := e.browser(t)
		b.client = "client-" + strconv.Itoa(i)
		wg.Go(func() { pages[i] = signIn(i, b) })
	}
	wg.Wait()
	return pages
}

func codesOf(pages []page) map[int]int {
	out := map[int]int{}
	for _, p := range pages {
		out[p.code]++
	}
	return out
}

// TestHashCapUnderConcurrentLogins (issue #41): many sign-ins at once
// never run more hashes together than the Hasher's slots; with every
// slot taken past the wait, the sign-in, the invite and the password
// change answer 503 with Retry-After, hash nothing and change nothing.
func TestHashCapUnderConcurrentLogins(t *testing.T) {
	e := newEnv(t) // two slots, a long wait: every sign-in gets its turn
	admin := e.signedIn(t, adminToken)
	e.accept(t, e.browser(t), e.invited(t, admin, "ed@example.org", "editor"), edPassword)
	before := e.passwords.Stats()
	pages := e.concurrently(t, 24, func(i int, b *browser) page {
		if i%2 == 0 {
			return b.signIn("ed@example.org", "a wrong guess number "+strconv.Itoa(i), "123456")
		}
		return b.signIn("nobody"+strconv.Itoa(i)+"@example.org", "a wrong guess", "123456")
	})
	if c := codesOf(pages); c[http.StatusUnauthorized] != 24 {
		t.Fatalf("answers %v, want 24 × 401", c)
	}
	s := e.passwords.Stats()
	if s.Peak > 2 || s.Computed-before.Computed != 24 || s.InFlight != 0 {
		t.Fatalf("hasher %+v after 24 sign-ins at once: want a peak of at most 2 slots and 24 hashes", s)
	}

	// Every slot taken, a wait that runs out.
	busy := newEnvHashing(t, accounts.NewHasher(1, 10*time.Millisecond))
	admin = busy.signedIn(t, adminToken)
	ed := busy.browser(t)
	path := busy.invited(t, admin, "ed@example.org", "editor")
	secret := secretOnPage.FindStringSubmatch(ed.get(path).body)[1]
	release, err := busy.passwords.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	code, _ := accounts.Code(secret, busy.clock.Now())
	p := ed.post(path, url.Values{"password": {edPassword}, "repeat": {edPassword}, "code": {code}})
	if p.code != http.StatusServiceUnavailable || p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "Nothing was changed") {
		t.Fatalf("accepting an invite with every slot taken: %d, Retry-After %q", p.code, p.header.Get("Retry-After"))
	}
	if _, err := busy.st.AccountByEmail(context.Background(), "ed@example.org"); err != store.ErrAccountNotFound {
		t.Fatalf("a refused acceptance made an account: %v", err)
	}
	pages = busy.concurrently(t, 20, func(i int, b *browser) page {
		return b.signIn("ed@example.org", "a guess number "+strconv.Itoa(i), "123456")
	})
	for _, p := range pages {
		if p.code != http.StatusServiceUnavailable || p.header.Get("Retry-After") != "2" {
			t.Fatalf("20 sign-ins at once with every slot taken: %d, Retry-After %q, want 503 and 2", p.code, p.header.Get("Retry-After"))
		}
	}
	if s := busy.passwords.Stats(); s.Computed != 0 {
		t.Fatalf("hashes computed while every slot was taken: %+v", s)
	}
	release()
	busy.accept(t, ed, path, edPassword) // a slot free again: it goes through
	release, err = busy.passwords.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	const next = "a brand new passphrase"
	p = ed.post("/admin/account/password", url.Values{"current": {edPassword}, "password": {next}, "repeat": {next}})
	if p.code != http.StatusServiceUnavailable || p.header.Get("Retry-After") == "" {
		t.Fatalf("changing the password with every slot taken: %d, Retry-After %q", p.code, p.header.Get("Retry-After"))
	}
	if a, _ := busy.st.AccountByEmail(context.Background(), "ed@example.org"); a.SessionGen != 0 {
		t.Fatal("a refused password change changed the password")
	}
}

// TestOverBudgetHashesNothing (issue #41): a client over its failure
// budget is answered 429 before its password is hashed.
func TestOverBudgetHashesNothing(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	e.accept(t, e.browser(t), e.invited(t, admin, "ed@example.org", "editor"), edPassword)
	e.guard.mu.Lock()
	e.guard.over = true
	e.guard.mu.Unlock()
	before := e.passwords.Stats().Computed
	for _, who := range []string{"ed@example.org", "nobody@example.org"} {
		p := e.browser(t).signIn(who, "a guess at a password", "123456")
		if p.code != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
			t.Fatalf("%s from a client over its budget: %d, Retry-After %q", who, p.code, p.header.Get("Retry-After"))
		}
	}
	if n := e.passwords.Stats().Computed - before; n != 0 {
		t.Fatalf("%d hashes for clients over their budget, want none", n)
	}
}

// wrongCodes are n six-digit codes none of which is secret's around now.
func wrongCodes(t *testing.T, secret string, now time.Time, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		c := fmt.Sprintf("%06d", 100000+i*7919)
		if _, ok := accounts.CheckCode(secret, c, now); !ok {
			out = append(out, c)
		}
	}
	return out
}

// TestTOTPGuessedInParallel (issue #41): twenty wrong codes sent at once
// after the right password are counted before they are checked, so five
// are checked and the rest told to wait; then the right code is refused
// with "wait" too, from any client, until the window ends; after it
// (the window's key expired in Redis, no sleep) the right code signs in.
func TestTOTPGuessedInParallel(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	secret, _ := e.accept(t, e.browser(t), e.invited(t, admin, "ed@example.org", "editor"), edPassword)
	e.clock.add(accounts.TOTPPeriod * time.Second)
	now := e.clock.Now()
	guesses := wrongCodes(t, secret, now, 20)
	pages := e.concurrently(t, 20, func(i int, b *browser) page { return b.signIn("ed@example.org", edPassword, guesses[i]) })
	if c := codesOf(pages); c[http.StatusUnauthorized] != store.SecondFactorFailures || c[http.StatusTooManyRequests] != 20-store.SecondFactorFailures {
		t.Fatalf("20 wrong codes at once: %v, want %d checked (401) and the rest told to wait (429)", c, store.SecondFactorFailures)
	}
	right, _ := accounts.Code(secret, now)
	owner := e.browser(t)
	owner.client = "the owner's phone"
	p := owner.signIn("ed@example.org", edPassword, right)
	if p.code != http.StatusTooManyRequests || !strings.Contains(p.body, "wait") || p.header.Get("Retry-After") == "" {
		t.Fatalf("the right code in the window: %d, Retry-After %q, want 429 and wait\n%s", p.code, p.header.Get("Retry-After"), p.body)
	}
	if wait, _ := strconv.Atoi(p.header.Get("Retry-After")); wait <= 0 || time.Duration(wait)*time.Second > store.SecondFactorWindow {
		t.Fatalf("Retry-After %q: want the rest of the window, at most %s", p.header.Get("Retry-After"), store.SecondFactorWindow)
	}
	// Without the password the pause does not show: a stranger gets the
	// answer of any wrong sign-in, as for an address without an account.
	stranger := e.browser(t)
	stranger.client = "a stranger"
	if p := stranger.signIn("ed@example.org", "not the password", right); p.code != http.StatusUnauthorized || strings.Contains(p.body, "Too many wrong codes") {
		t.Fatalf("a wrong password to a paused account: %d, want 401 with no word of the pause\n%s", p.code, p.body)
	}
	// The window ends (its key's TTL run out), never a lock for good.
	a, _ := e.st.AccountByEmail(context.Background(), "ed@example.org")
	key := "nl:{acct}:2fa:" + strconv.FormatInt(a.ID, 10)
	if ttl := e.rdb.PTTL(context.Background(), key).Val(); ttl <= 0 || ttl > store.SecondFactorWindow {
		t.Fatalf("the window's key %s has TTL %s: want at most the window", key, ttl)
	}
	if err := e.rdb.PExpire(context.Background(), key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the window's key expires", func() bool { return e.rdb.Exists(context.Background(), key).Val() == 0 })
	if p := owner.signIn("ed@example.org", edPassword, right); p.code != http.StatusSeeOther {
		t.Fatalf("the right code after the window: %d\n%s", p.code, p.body)
	}
}

// TestUnknownAddressHeldAsAKnownOne (issue #41): failures as an address
// without an account are counted by the address, as an account's are:
// the same holds, one after another, and the same one hash each.
func TestUnknownAddressHeldAsAKnownOne(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	e.accept(t, e.browser(t), e.invited(t, admin, "ed@example.org", "editor"), edPassword)
	heldFor := func(email string) ([]time.Duration, int64) {
		e.holds.mu.Lock()
		e.holds.account = nil
		e.holds.mu.Unlock()
		before := e.passwords.Stats().Computed
		for i := range 4 {
			b := e.browser(t)
			b.client = email + strconv.Itoa(i)
			if p := b.signIn(email, "a wrong password of twelve", "123456"); p.code != http.StatusUnauthorized {
				t.Fatalf("%s: %d", email, p.code)
			}
		}
		e.holds.mu.Lock()
		defer e.holds.mu.Unlock()
		return slices.Clone(e.holds.account), e.passwords.Stats().Computed - before
	}
	known, knownHashes := heldFor("ed@example.org")
	unknown, unknownHashes := heldFor("nobody@example.org")
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	if !slices.Equal(known, want) || !slices.Equal(unknown, known) {
		t.Fatalf("holds: an account %v, no account %v; want both %v", known, unknown, want)
	}
	if knownHashes != 4 || unknownHashes != 4 {
		t.Fatalf("hashes: an account %d, no account %d; want 4 each", knownHashes, unknownHashes)
	}
}

var (
	qrOnPage  = regexp.MustCompile(`<img id="totp-qr" src="data:image/png;base64,([^"]+)"`)
	uriOnPage = regexp.MustCompile(`<a id="totp-uri" href="([^"]+)"`)
)

// checkAuthenticator: a page shows secret as text, an otpauth:// link
// (not html/template's #ZgotmplZ) and a QR code PNG, under a CSP that
// lets a data: image show.
func checkAuthenticator(t *testing.T, what string, p page, secret string) {
	t.Helper()
	if !strings.Contains(p.body, `id="totp-secret">`+secret+`<`) || strings.Contains(p.body, "ZgotmplZ") {
		t.Fatalf("%s: no secret, or a ZgotmplZ link:\n%s", what, p.body)
	}
	m := uriOnPage.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("%s: no otpauth link:\n%s", what, p.body)
	}
	u, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil || u.Scheme != "otpauth" || u.Host != "totp" || u.Query().Get("secret") != secret || !strings.Contains(u.Path, "ed@example.org") {
		t.Fatalf("%s: the link %q (%v)", what, m[1], err)
	}
	q := qrOnPage.FindStringSubmatch(p.body)
	if q == nil {
		t.Fatalf("%s: no QR code:\n%s", what, p.body)
	}
	raw, err := base64.StdEncoding.DecodeString(html.UnescapeString(q[1]))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() != 200 || img.Bounds().Dy() != 200 {
		t.Fatalf("%s: the QR code is not a 200×200 PNG: %v", what, err)
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data:") {
		t.Fatalf("%s: the CSP %q does not let a data: image show", what, csp)
	}
}

// TestAuthenticatorQRAndLink (issue #41): the invite page and the account
// page's new authenticator show the key, a working otpauth:// link and a
// QR code.
func TestAuthenticatorQRAndLink(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	ed := e.browser(t)
	path := e.invited(t, admin, "ed@example.org", "editor")
	p := ed.get(path)
	secret := secretOnPage.FindStringSubmatch(p.body)[1]
	checkAuthenticator(t, "the invite page", p, secret)
	e.accept(t, ed, path, edPassword)
	if p := ed.post("/admin/account/totp", nil); p.code != http.StatusSeeOther {
		t.Fatalf("new authenticator: %d", p.code)
	}
	p = ed.get("/admin/account")
	pending := secretOnPage.FindStringSubmatch(p.body)
	if pending == nil {
		t.Fatalf("no pending secret:\n%s", p.body)
	}
	checkAuthenticator(t, "the account page", p, pending[1])
}

// TestRevokeInvite (issue #41): an admin revokes an open invite from the
// accounts screen; its link then says it was revoked (410) and accepting
// it changes nothing; the revocation is audited; revoking again is 404.
func TestRevokeInvite(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	path := e.invited(t, admin, "ed@example.org", "editor")
	ed := e.browser(t)
	secret := secretOnPage.FindStringSubmatch(ed.get(path).body)[1]
	list := admin.get("/admin/accounts")
	action := regexp.MustCompile(`action="(/admin/accounts/invites/[0-9a-f]{64}/revoke)"`).FindStringSubmatch(list.body)
	if action == nil {
		t.Fatalf("no revoke button on the accounts screen:\n%s", list.body)
	}
	if p := e.signedIn(t, editorToken).post(action[1], nil); p.code != http.StatusForbidden && p.code != http.StatusNotFound {
		t.Fatalf("an editor revoking: %d", p.code)
	}
	if p := admin.post(action[1], nil); p.code != http.StatusSeeOther || p.location != "/admin/accounts?done=invite-revoked" {
		t.Fatalf("revoke: %d to %q\n%s", p.code, p.location, p.body)
	}
	if p := ed.get(path); p.code != http.StatusGone || !strings.Contains(p.body, "revoked") {
		t.Fatalf("the revoked link: %d\n%s", p.code, p.body)
	}
	code, _ := accounts.Code(secret, e.clock.Now())
	if p := ed.post(path, url.Values{"password": {edPassword}, "repeat": {edPassword}, "code": {code}}); p.code != http.StatusGone {
		t.Fatalf("accepting the revoked invite: %d", p.code)
	}
	if _, err := e.st.AccountByEmail(context.Background(), "ed@example.org"); err != store.ErrAccountNotFound {
		t.Fatalf("a revoked invite made an account: %v", err)
	}
	if strings.Contains(admin.get("/admin/accounts").body, action[1]) {
		t.Fatal("the revoked invite is still listed")
	}
	if p := admin.post(action[1], nil); p.code != http.StatusNotFound {
		t.Fatalf("revoking again: %d, want 404", p.code)
	}
	if acts := e.audit.actions(); !slices.Contains(acts, "alice account.invite_revoked") {
		t.Fatalf("audit %v lacks the revocation", acts)
	}
}
