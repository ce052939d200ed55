package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestFieldValuesTakeJSONNumbers: a number field's value may be a JSON
// number (POST and PATCH /api/subscribers), checked by the field's type
// as its text is; a choice field's choices may be numbers (POST
// /api/fields), and a number then picks one. A value that is neither a
// string nor a number is a 400 naming the field, nothing changed.
func TestFieldValuesTakeJSONNumbers(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	for _, body := range []string{`{"name":"seats","type":"number"}`, `{"name":"since","type":"date"}`, `{"name":"size","type":"choice","choices":[1,2.5,"xl"]}`} {
		if code, out := e.adminRaw2(t, "POST", "/api/fields", body); code != http.StatusOK {
			t.Fatalf("POST /api/fields %s: %d %s", body, code, out)
		}
	}
	if code, out := e.adminRaw2(t, "GET", "/api/fields", ""); code != 200 || !strings.Contains(out, `"choices":["1","2.5","xl"]`) {
		t.Fatalf("the numeric choices: %d %s", code, out)
	}
	if code, out := e.adminRaw2(t, "POST", "/api/fields", `{"name":"x","type":"choice","choices":[true]}`); code != 400 || !strings.Contains(out, "strings or numbers") {
		t.Fatalf("a choice of true: %d %s", code, out)
	}
	code, out := e.adminRaw2(t, "POST", "/api/subscribers", `{"email":"n@example.com","reason":"asked at the desk","fields":{"seats":12,"size":2.5}}`)
	if code != http.StatusCreated {
		t.Fatalf("add with numbers: %d %s", code, out)
	}
	if sub, _ := e.store.Get(ctx, "n@example.com"); sub.Fields["seats"] != "12" || sub.Fields["size"] != "2.5" {
		t.Fatalf("fields %v: want seats 12, size 2.5", sub.Fields)
	}
	if code, out := e.adminRaw2(t, "PATCH", "/api/subscribers/n@example.com", `{"fields":{"seats":1.5e1}}`); code != 200 {
		t.Fatalf("patch with a number: %d %s", code, out)
	}
	if sub, _ := e.store.Get(ctx, "n@example.com"); sub.Fields["seats"] != "15" {
		t.Fatalf("seats %q after 1.5e1: want 15 (the number field's form)", sub.Fields["seats"])
	}
	for _, c := range []struct{ body, want string }{
		{`{"fields":{"seats":true}}`, "a value is a string or a number"},
		{`{"fields":{"since":20260101}}`, "not a date"},
		{`{"fields":{"size":3}}`, "not one of"},
		{`{"fields":["seats"]}`, "an object of field names and values"},
	} {
		if code, out := e.adminRaw2(t, "PATCH", "/api/subscribers/n@example.com", c.body); code != 400 || !strings.Contains(out, c.want) {
			t.Errorf("%s: %d %s, want 400 %q", c.body, code, out, c.want)
		}
	}
	if sub, _ := e.store.Get(ctx, "n@example.com"); sub.Fields["seats"] != "15" || sub.Fields["size"] != "2.5" || sub.Fields["since"] != "" {
		t.Fatalf("a refused patch changed the fields: %v", sub.Fields)
	}
}
