package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/services/csvimport"
)

// GET /api/imports/{id} answers an import's status: state, the file's
// lines, the rows read, added and present, and the rejected lines as a
// list of {line, reason}: empty, never null, before any was rejected.
func TestGetImport(t *testing.T) {
	s, _, tokens, _ := matrixServerStore(t)
	jobs := s.deps.Imports.(*csvimport.Jobs)
	ctx := t.Context()
	if err := jobs.Create(ctx, "job1", csvimport.Job{File: "list.csv", Size: 40, By: "alice", Lines: 4}, []byte("email\na@example.com\n\"b\nc@example.com\n")); err != nil {
		t.Fatal(err)
	}
	get := func(id string) (int, map[string]json.RawMessage) {
		req := httptest.NewRequest("GET", "/api/imports/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+tokens[adminauth.Admin])
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v", rec.Body.String(), err)
		}
		return rec.Code, body
	}
	code, body := get("job1")
	if code != http.StatusOK || string(body["state"]) != `"running"` || string(body["lines"]) != "4" || string(body["read"]) != "0" ||
		string(body["added"]) != "0" || string(body["present"]) != "0" || string(body["rejected"]) != "[]" {
		t.Fatalf("a waiting import: %d %s", code, body)
	}
	p := csvimport.Progress{Line: 4, Header: 1, Read: 3, Added: 1, Present: 1, Rejected: []csvimport.Rejection{{Line: 3, Reason: "unbalanced quote"}}}
	if _, err := jobs.Finish(ctx, "job1", p, csvimport.StateDone, ""); err != nil {
		t.Fatal(err)
	}
	code, body = get("job1")
	if code != http.StatusOK || string(body["state"]) != `"done"` || string(body["read"]) != "3" || string(body["added"]) != "1" ||
		string(body["present"]) != "1" || string(body["rejected"]) != `[{"line":3,"reason":"unbalanced quote"}]` || string(body["rejected_more"]) != "0" {
		t.Fatalf("an ended import: %d %s", code, body)
	}
	if code, _ := get("nope"); code != http.StatusNotFound {
		t.Fatalf("an unknown import: %d", code)
	}
}
