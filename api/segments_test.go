package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// Fields are declared with a type (bad ones 400, a type kept), segments
// saved with a checked expression (a bad one 400 naming the position,
// nothing saved), counted live, renamed and deleted.
func TestFieldsAndSegments(t *testing.T) {
	e := newHooksEnv(t, Config{})
	ctx := context.Background()
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"name":"plan","type":"choice","choices":["free","pro"]}`, http.StatusOK, `"choices":["free","pro"]`},
		{`{"name":"seats","type":"number"}`, http.StatusOK, `"type":"number"`},
		{`{"name":"Seats","type":"number"}`, http.StatusBadRequest, "a-z, 0-9 and _"},
		{`{"name":"x","type":"bool"}`, http.StatusBadRequest, "one of text, number, date, choice"},
		{`{"name":"seats","type":"text"}`, http.StatusBadRequest, "keeps its type"},
		{`{"name":"x","type":"text","extra":1}`, http.StatusBadRequest, "extra"},
	} {
		if code, body := e.hookAdmin(t, "POST", "/api/fields", c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Fatalf("POST /api/fields %s: %d %s", c.body, code, body)
		}
	}
	if code, body := e.hookAdmin(t, "GET", "/api/fields", ""); code != 200 || !strings.Contains(body, `"name":"plan"`) || !strings.Contains(body, `"name":"seats"`) {
		t.Fatalf("GET /api/fields: %d %s", code, body)
	}
	a, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "pro@x.io", Activate: true, Topics: []string{"updates"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.AddTags(ctx, a.ID, []string{"beta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetFields(ctx, a.ID, map[string]string{"plan": "pro", "seats": "12"}); err != nil {
		t.Fatal(err)
	}
	if code, body := e.hookAdmin(t, "GET", "/api/tags", ""); code != 200 || body != `{"tags":["beta"]}`+"\n" {
		t.Fatalf("GET /api/tags: %d %q", code, body)
	}
	code, body := e.hookAdmin(t, "POST", "/api/segments", `{"name":"Pro beta","expr":"tag:beta AND field.seats >= 10 AND field.plan = pro"}`)
	var seg store.Segment
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &seg) != nil || seg.ID == 0 {
		t.Fatalf("POST /api/segments: %d %s", code, body)
	}
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"name":"Bad","expr":"tag:beta AND (field.seats > 3"}`, http.StatusBadRequest, `"position":30`},
		{`{"name":"Bad","expr":"field.seats > many"}`, http.StatusBadRequest, "is a number"},
		{`{"name":"Bad","expr":"tag:nobody"}`, http.StatusBadRequest, "no tag"},
		{`{"name":"Pro beta","expr":"tag:beta"}`, http.StatusConflict, "another segment's"},
		{`{"name":"","expr":"tag:beta"}`, http.StatusBadRequest, "bad segment name"},
	} {
		if code, body := e.hookAdmin(t, "POST", "/api/segments", c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Fatalf("POST /api/segments %s: %d %s", c.body, code, body)
		}
	}
	if list, _ := e.store.ListSegments(ctx); len(list) != 1 {
		t.Fatalf("refused segments were saved: %+v", list)
	}
	q := "/api/segments/count?expr=" + url.QueryEscape("topic:updates AND NOT tag:beta")
	if code, body := e.hookAdmin(t, "GET", q, ""); code != 200 || !strings.Contains(body, `"active":0`) {
		t.Fatalf("count: %d %s", code, body)
	}
	q = "/api/segments/count?expr=" + url.QueryEscape("tag:beta AND field.plan = pro")
	if code, body := e.hookAdmin(t, "GET", q, ""); code != 200 || !strings.Contains(body, `"active":1`) || !strings.Contains(body, `"matching":1`) {
		t.Fatalf("count: %d %s", code, body)
	}
	if code, body := e.hookAdmin(t, "GET", "/api/segments/count?expr=tag:beta+AND", ""); code != 400 || !strings.Contains(body, "position") {
		t.Fatalf("count of a bad expression: %d %s", code, body)
	}
	id := "/api/segments/" + jsonNumber(seg.ID)
	if code, body := e.hookAdmin(t, "PUT", id, `{"name":"Beta","expr":"tag:beta"}`); code != 200 || !strings.Contains(body, `"name":"Beta"`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := e.hookAdmin(t, "GET", "/api/segments/Beta", ""); code != 200 || !strings.Contains(body, `"expr":"tag:beta"`) {
		t.Fatalf("GET by name: %d %s", code, body)
	}
	if code, _ := e.hookAdmin(t, "DELETE", id, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	if code, _ := e.hookAdmin(t, "GET", id, ""); code != http.StatusNotFound {
		t.Fatalf("GET a deleted segment: %d", code)
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestSegmentCountBounded: GET /api/segments/count refuses an expression
// of more than segment.MaxTerms terms (400 naming the position) and
// answers a count that does not finish within the store's bound with a
// clear 503, nothing counted.
func TestSegmentCountBounded(t *testing.T) {
	e := newHooksEnv(t, Config{})
	long := strings.Repeat("topic:updates OR ", segment.MaxTerms) + "topic:digest"
	code, body := e.hookAdmin(t, "GET", "/api/segments/count?expr="+url.QueryEscape(long), "")
	if code != http.StatusBadRequest || !strings.Contains(body, "more than 50 terms") || !strings.Contains(body, `"position":`+strconv.Itoa(len("topic:updates OR ")*segment.MaxTerms+1)) {
		t.Fatalf("%d terms: %d %s", segment.MaxTerms+1, code, body)
	}
	if code, body := e.hookAdmin(t, "GET", "/api/segments/count?expr=topic:updates", ""); code != http.StatusOK {
		t.Fatalf("a plain count: %d %s", code, body)
	}

	slow := newEnvWith(t, Config{AdminToken: hooksAdmin}, func(d *Deps) {
		d.Store = d.Store.(*store.Redis).WithSegmentCountTimeout(time.Nanosecond)
	})
	code, body = slow.hookAdmin(t, "GET", "/api/segments/count?expr=topic:updates", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "the count did not finish in time") {
		t.Fatalf("a count past its bound: %d %s", code, body)
	}
}
