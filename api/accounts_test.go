package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// TestInviteAccountAPI: an admin invites by e-mail with a role (201, the
// link never in the answer: it is mailed); a bad address or role is 400
// and an address with an account 409, nothing stored; an editor is 403;
// the list shows accounts without secrets.
func TestInviteAccountAPI(t *testing.T) {
	s, st, tokens, _ := matrixServerStore(t)
	do := func(role adminauth.Role, method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[role])
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	for _, bad := range []string{`{"email":"not an address","role":"viewer"}`, `{"email":"ann@example.org","role":"root"}`, `{"email":"ann@example.org"}`, `{"role":"viewer"}`} {
		if rec := do(adminauth.Admin, "POST", "/api/accounts/invites", bad); rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s, want 400", bad, rec.Code, rec.Body)
		}
	}
	if rec := do(adminauth.Editor, "POST", "/api/accounts/invites", `{"email":"ann@example.org","role":"viewer"}`); rec.Code != http.StatusForbidden {
		t.Fatalf("an editor inviting: %d", rec.Code)
	}
	if list, err := st.ListInvites(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("invites after refused requests: %+v %v", list, err)
	}
	rec := do(adminauth.Admin, "POST", "/api/accounts/invites", `{"email":"Ann@Example.org","role":"editor"}`)
	var got struct {
		Email, Role, Expires string
	}
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.Email != "ann@example.org" || got.Role != "editor" || got.Expires == "" ||
		strings.Contains(rec.Body.String(), "/admin/invite/") {
		t.Fatalf("invite: %d %s", rec.Code, rec.Body)
	}
	list, err := st.ListInvites(context.Background())
	if err != nil || len(list) != 1 || list[0].Email != "ann@example.org" || list[0].Role != adminauth.Editor || list[0].By != "matrix-admin" {
		t.Fatalf("the invite stored: %+v %v", list, err)
	}
	if rec := do(adminauth.Admin, "GET", "/api/accounts", ""); rec.Code != http.StatusOK || rec.Body.String() != "{\"accounts\":[]}\n" {
		t.Fatalf("list: %d %q", rec.Code, rec.Body)
	}
}

// TestRevokeInviteAPI: an admin revokes an open invite by its id (204,
// audited); the invite leaves the list and its link would say it was
// revoked; revoking again, an unknown id or one that is not an id is
// 404; an editor is 403 and changes nothing.
func TestRevokeInviteAPI(t *testing.T) {
	s, st, tokens, _ := matrixServerStore(t)
	do := func(role adminauth.Role, method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[role])
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	rec := do(adminauth.Admin, "POST", "/api/accounts/invites", `{"email":"ann@example.org","role":"editor"}`)
	var got struct{ ID string }
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.ID) != 64 {
		t.Fatalf("invite: %d %s", rec.Code, rec.Body)
	}
	if rec := do(adminauth.Editor, "DELETE", "/api/accounts/invites/"+got.ID, ""); rec.Code != http.StatusForbidden {
		t.Fatalf("an editor revoking: %d", rec.Code)
	}
	if list, _ := st.ListInvites(context.Background()); len(list) != 1 {
		t.Fatalf("after an editor's refused revoke: %+v", list)
	}
	if rec := do(adminauth.Admin, "DELETE", "/api/accounts/invites/"+got.ID, ""); rec.Code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	if _, err := st.InviteByHash(context.Background(), got.ID); !errors.Is(err, store.ErrInviteRevoked) {
		t.Fatalf("the revoked invite: %v, want ErrInviteRevoked", err)
	}
	if list, _ := st.ListInvites(context.Background()); len(list) != 0 {
		t.Fatalf("invites after revoking: %+v", list)
	}
	for _, id := range []string{got.ID, strings.Repeat("0", 64), "not-an-id", strings.ToUpper(got.ID)} {
		if rec := do(adminauth.Admin, "DELETE", "/api/accounts/invites/"+id, ""); rec.Code != http.StatusNotFound {
			t.Fatalf("revoking %q: %d, want 404", id, rec.Code)
		}
	}
	entries, err := st.AuditEntries(context.Background(), "", 10)
	if err != nil || len(entries) == 0 || entries[0].Action != audit.AccountInviteRevoked || entries[0].Target != "account:ann@example.org" || entries[0].Actor != "matrix-admin" {
		t.Fatalf("audit: %+v %v", entries, err)
	}
}
