package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

// testAccounts: an invite becomes one account once, with its secret and
// codes; steps and recovery codes are used once; suspension, roles and
// failures are kept; an address with an account cannot be invited.
func testAccounts(t *testing.T, _ Harness, s store.Store) {
	a, ok := s.(store.Accounts)
	if !ok {
		t.Skip("this store keeps no accounts")
	}
	ctx := context.Background()
	exp := time.Now().Add(48 * time.Hour)
	inv := store.Invite{Hash: "aa01", Email: "ann@example.org", Role: adminauth.Editor, By: "admin-token", Expires: exp}
	if err := a.CreateInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcceptInvite(ctx, "aa01", "pw-hash", 1, nil); !errors.Is(err, store.ErrInviteNotFound) {
		t.Fatalf("accepting before the page kept a secret: %v, want ErrInviteNotFound", err)
	}
	got, err := a.InviteByHash(ctx, "aa01")
	if err != nil || got.Email != inv.Email || got.Role != adminauth.Editor || got.By != "admin-token" || got.Expires.UnixMilli() != exp.UnixMilli() {
		t.Fatalf("invite: %+v %v", got, err)
	}
	if sec, err := a.InviteSecret(ctx, "aa01", "SECRETONE"); err != nil || sec != "SECRETONE" {
		t.Fatalf("first secret: %q %v", sec, err)
	}
	if sec, err := a.InviteSecret(ctx, "aa01", "SECRETTWO"); err != nil || sec != "SECRETONE" {
		t.Fatalf("a second look keeps the first secret: %q %v", sec, err)
	}
	if list, err := a.ListInvites(ctx); err != nil || len(list) != 1 || list[0].Email != inv.Email {
		t.Fatalf("invites: %+v %v", list, err)
	}
	acct, err := a.AcceptInvite(ctx, "aa01", "pw-hash", 7, []string{"rc1", "rc2"})
	if err != nil || acct.ID == 0 || acct.Email != inv.Email || acct.Role != adminauth.Editor || acct.TOTPSecret != "SECRETONE" {
		t.Fatalf("accept: %+v %v", acct, err)
	}
	if _, err := a.AcceptInvite(ctx, "aa01", "pw-hash", 8, nil); !errors.Is(err, store.ErrInviteNotFound) {
		t.Fatalf("an invite accepted twice: %v", err)
	}
	if list, err := a.ListInvites(ctx); err != nil || len(list) != 0 {
		t.Fatalf("invites after accepting: %+v %v", list, err)
	}
	if err := a.CreateInvite(ctx, store.Invite{Hash: "aa02", Email: inv.Email, Role: adminauth.Viewer, Expires: exp}); !errors.Is(err, store.ErrAccountExists) {
		t.Fatalf("inviting an address with an account: %v", err)
	}
	byMail, err := a.AccountByEmail(ctx, inv.Email)
	if err != nil || byMail.ID != acct.ID || byMail.PasswordHash != "pw-hash" || byMail.TOTPStep != 7 || byMail.Created.IsZero() {
		t.Fatalf("by address: %+v %v", byMail, err)
	}
	if _, err := a.AccountByEmail(ctx, "nobody@example.org"); !errors.Is(err, store.ErrAccountNotFound) {
		t.Fatalf("an unknown address: %v", err)
	}

	// A TOTP step once, and only later ones.
	for _, c := range []struct {
		step int64
		ok   bool
	}{{7, false}, {6, false}, {8, true}, {8, false}} {
		if ok, err := a.UseTOTPStep(ctx, acct.ID, c.step); err != nil || ok != c.ok {
			t.Fatalf("step %d: %v %v, want %v", c.step, ok, err, c.ok)
		}
	}
	// A recovery code once.
	if ok, err := a.UseRecoveryCode(ctx, acct.ID, "rc1"); err != nil || !ok {
		t.Fatalf("recovery code: %v %v", ok, err)
	}
	if ok, err := a.UseRecoveryCode(ctx, acct.ID, "rc1"); err != nil || ok {
		t.Fatalf("recovery code again: %v %v", ok, err)
	}
	if n, err := a.RecoveryCodesLeft(ctx, acct.ID); err != nil || n != 1 {
		t.Fatalf("codes left: %d %v", n, err)
	}

	if err := a.SignedIn(ctx, acct.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.SetRole(ctx, acct.ID, adminauth.Viewer); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSuspended(ctx, acct.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPassword(ctx, acct.ID, "pw-hash-2"); err != nil {
		t.Fatal(err)
	}
	now, err := a.Account(ctx, acct.ID)
	if err != nil || now.LastSignIn.IsZero() || now.Role != adminauth.Viewer || !now.Suspended || now.PasswordHash != "pw-hash-2" ||
		now.SessionGen != byMail.SessionGen+1 {
		t.Fatalf("after changes: %+v %v", now, err)
	}

	// A new secret waits for its code; its confirmation replaces the codes.
	if err := a.SetPendingTOTP(ctx, acct.ID, "SECRETNEW"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.ConfirmTOTP(ctx, acct.ID, "SECRETOLD", 9, []string{"x"}); err != nil || ok {
		t.Fatalf("confirming a secret that is not pending: %v %v", ok, err)
	}
	if ok, err := a.ConfirmTOTP(ctx, acct.ID, "SECRETNEW", 9, []string{"rc3", "rc4", "rc5"}); err != nil || !ok {
		t.Fatalf("confirming: %v %v", ok, err)
	}
	if now, err := a.Account(ctx, acct.ID); err != nil || now.TOTPSecret != "SECRETNEW" || now.PendingTOTP != "" || now.TOTPStep != 9 {
		t.Fatalf("after confirming: %+v %v", now, err)
	}
	if ok, _ := a.UseRecoveryCode(ctx, acct.ID, "rc2"); ok {
		t.Fatal("an old recovery code still works after new ones were made")
	}
	if n, err := a.RecoveryCodesLeft(ctx, acct.ID); err != nil || n != 3 {
		t.Fatalf("codes left: %d %v", n, err)
	}

	// Nothing is made of an unknown account.
	if id, gen, ok := store.AccountOfSessionRef(store.AccountSessionRef(now)); !ok || id != acct.ID || gen != now.SessionGen {
		t.Fatalf("a session's reference read back: %d %d %v", id, gen, ok)
	}
	if err := a.SetPassword(ctx, 999, "x"); !errors.Is(err, store.ErrAccountNotFound) {
		t.Fatalf("password of an unknown account: %v", err)
	}
	if err := a.SetRole(ctx, 999, adminauth.Admin); !errors.Is(err, store.ErrAccountNotFound) {
		t.Fatalf("role of an unknown account: %v", err)
	}
	if list, err := a.ListAccounts(ctx); err != nil || len(list) != 1 || list[0].ID != acct.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	// An expired invite is gone.
	if err := a.CreateInvite(ctx, store.Invite{Hash: "aa03", Email: "bob@example.org", Role: adminauth.Viewer, Expires: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.InviteByHash(ctx, "aa03"); !errors.Is(err, store.ErrInviteNotFound) {
		t.Fatalf("an expired invite: %v", err)
	}
}
