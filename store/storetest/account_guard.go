package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

// testAccountGuard: the failures of an address are counted alike whether
// it has an account or not; the second factor's tries are counted before
// the check, so of many sent at once only SecondFactorFailures get
// through, per account and per client; a right code's try is taken back.
func testAccountGuard(t *testing.T, _ Harness, s store.Store) {
	a, ok := s.(store.Accounts)
	if !ok {
		t.Skip("this store keeps no accounts")
	}
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if n, err := a.SignInFailedAs(ctx, "nobody@example.org"); err != nil || n != i {
			t.Fatalf("failure %d of an unknown address: %d %v", i, n, err)
		}
	}
	if err := a.SignedInAs(ctx, "nobody@example.org"); err != nil {
		t.Fatal(err)
	}
	if n, err := a.SignInFailedAs(ctx, "nobody@example.org"); err != nil || n != 1 {
		t.Fatalf("after a sign-in: %d %v, want 1", n, err)
	}

	const id = 7001
	var wg sync.WaitGroup
	var mu sync.Mutex
	checked := 0
	for range 20 {
		wg.Go(func() {
			wait, err := a.TrySecondFactor(ctx, id, "client-a")
			if err != nil {
				t.Error(err)
				return
			}
			if wait == 0 {
				mu.Lock()
				checked++
				mu.Unlock()
			} else if wait > store.SecondFactorWindow {
				t.Errorf("paused for %s, longer than the window", wait)
			}
		})
	}
	wg.Wait()
	if checked != store.SecondFactorFailures {
		t.Fatalf("%d of 20 tries sent at once were let through, want %d", checked, store.SecondFactorFailures)
	}
	// The account is paused for every client, a fresh one too.
	if wait, err := a.TrySecondFactor(ctx, id, "a fresh client"); err != nil || wait <= 0 || wait > store.SecondFactorWindow {
		t.Fatalf("the account after 20 tries, from a fresh client: paused %s %v", wait, err)
	}
	// Another client, another account: the client is paused too.
	if wait, err := a.TrySecondFactor(ctx, id+1, "client-a"); err != nil || wait == 0 {
		t.Fatalf("the paused client on another account: %s %v", wait, err)
	}
	if wait, err := a.TrySecondFactor(ctx, id+2, "another fresh client"); err != nil || wait != 0 {
		t.Fatalf("an untouched account: %s %v", wait, err)
	}
	// A right code takes its try back: four right ones in a row from a
	// fresh client on a fresh account never pause it.
	for i := range 2 * store.SecondFactorFailures {
		wait, err := a.TrySecondFactor(ctx, id+3, "client-b")
		if err != nil || wait != 0 {
			t.Fatalf("right code %d: paused %s %v", i+1, wait, err)
		}
		if err := a.SecondFactorPassed(ctx, id+3, "client-b"); err != nil {
			t.Fatal(err)
		}
	}
}

// testInviteRevoke: a revoked invite leaves the list, says it was
// revoked, and cannot be accepted; revoking it again, or an unknown one,
// is ErrInviteNotFound.
func testInviteRevoke(t *testing.T, _ Harness, s store.Store) {
	a, ok := s.(store.Accounts)
	if !ok {
		t.Skip("this store keeps no accounts")
	}
	ctx := context.Background()
	inv := store.Invite{Hash: "rv01", Email: "rita@example.org", Role: adminauth.Viewer, By: "alice", Expires: time.Now().Add(time.Hour)}
	if err := a.CreateInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if _, err := a.InviteSecret(ctx, "rv01", "SECRET"); err != nil {
		t.Fatal(err)
	}
	if email, err := a.RevokeInvite(ctx, "rv01", "alice"); err != nil || email != inv.Email {
		t.Fatalf("revoke: %q %v", email, err)
	}
	if _, err := a.InviteByHash(ctx, "rv01"); !errors.Is(err, store.ErrInviteRevoked) {
		t.Fatalf("a revoked invite: %v, want ErrInviteRevoked", err)
	}
	if _, err := a.AcceptInvite(ctx, "rv01", "pw-hash", 1, nil); !errors.Is(err, store.ErrInviteRevoked) {
		t.Fatalf("accepting a revoked invite: %v", err)
	}
	if _, err := a.AccountByEmail(ctx, inv.Email); !errors.Is(err, store.ErrAccountNotFound) {
		t.Fatalf("a revoked invite made an account: %v", err)
	}
	if list, err := a.ListInvites(ctx); err != nil || len(list) != 0 {
		t.Fatalf("invites after revoking: %+v %v", list, err)
	}
	for _, h := range []string{"rv01", "rv99"} {
		if _, err := a.RevokeInvite(ctx, h, "alice"); !errors.Is(err, store.ErrInviteNotFound) {
			t.Fatalf("revoking %s: %v, want ErrInviteNotFound", h, err)
		}
	}
}
