package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

// testTokens: a token is found by its hash only, names are unique, the
// list never holds a hash, and a revoked token is unknown at once.
func testTokens(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	if list, err := s.ListTokens(ctx); err != nil || len(list) != 0 {
		t.Fatalf("an empty store lists %v, %v", list, err)
	}
	ann, ci := adminauth.HashToken("ann-token-0123456789"), adminauth.HashToken("ci-token-0123456789")
	made, err := s.CreateToken(ctx, ann, adminauth.StoredToken{Name: "ann", Role: adminauth.Editor})
	if err != nil || made.Name != "ann" || made.Role != adminauth.Editor || made.Created.IsZero() {
		t.Fatalf("create: %+v %v", made, err)
	}
	if _, err := s.CreateToken(ctx, ci, adminauth.StoredToken{Name: "ci", Role: adminauth.Viewer}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateToken(ctx, adminauth.HashToken("other-token-0123456789"), adminauth.StoredToken{Name: "ann", Role: adminauth.Admin}); !errors.Is(err, store.ErrTokenNameTaken) {
		t.Fatalf("a taken name: %v", err)
	}
	if p, err := s.LookupToken(ctx, ann); err != nil || p != (adminauth.Principal{Name: "ann", Role: adminauth.Editor}) {
		t.Fatalf("lookup: %+v %v", p, err)
	}
	if _, err := s.LookupToken(ctx, adminauth.HashToken("nobody's")); !errors.Is(err, adminauth.ErrUnknownToken) {
		t.Fatalf("an unknown hash: %v", err)
	}
	list, err := s.ListTokens(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "ann" || list[1].Name != "ci" || list[1].Role != adminauth.Viewer ||
		!list[0].Created.Equal(made.Created) {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := s.RevokeToken(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, ann); !errors.Is(err, adminauth.ErrUnknownToken) {
		t.Fatalf("a revoked token: %v", err)
	}
	if err := s.RevokeToken(ctx, "ann"); !errors.Is(err, store.ErrTokenNotFound) {
		t.Fatalf("revoking twice: %v", err)
	}
	// The name is free again, for a new token.
	if _, err := s.CreateToken(ctx, adminauth.HashToken("ann-new-token-0123456789"), adminauth.StoredToken{Name: "ann", Role: adminauth.Admin}); err != nil {
		t.Fatalf("a revoked token's name again: %v", err)
	}
	if list, err := s.ListTokens(ctx); err != nil || len(list) != 2 {
		t.Fatalf("list after revoke and create: %+v %v", list, err)
	}
}
