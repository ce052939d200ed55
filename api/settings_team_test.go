package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// TestSettingsConfirmedPageAndTestList: PUT /api/settings keeps the
// confirmed page's heading, text and URL and the team's test list
// (normalised, each once); a bad one is a 400 naming the field, and
// nothing changes.
func TestSettingsConfirmedPageAndTestList(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBAPI)
	one := newSettingsProcess(t, store.NewRedis(rdb), false)
	code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", `{"confirmed_heading":" Welcome ","confirmed_text":"Line one\r\n\r\nLine two",
		"confirmed_url":"https://example.com/start","test_recipients":["Team@Example.com","ed@example.com","team@example.com"]}`)
	if code != http.StatusOK {
		t.Fatalf("save: %d %s", code, body)
	}
	saved := readSettings(t, one)
	if saved.ConfirmedHeading != "Welcome" || saved.ConfirmedText != "Line one\n\nLine two" || saved.ConfirmedURL != "https://example.com/start" ||
		!reflect.DeepEqual(saved.TestRecipients, []string{"team@example.com", "ed@example.com"}) {
		t.Fatalf("saved %+v", saved)
	}
	many := make([]string, 21)
	for i := range many {
		many[i] = fmt.Sprintf(`"t%d@example.com"`, i)
	}
	for _, c := range []struct{ body, field string }{
		{`{"confirmed_url":"javascript:alert(1)"}`, "confirmed_url"},
		{`{"confirmed_url":"/relative"}`, "confirmed_url"},
		{`{"confirmed_heading":"` + strings.Repeat("h", 101) + `"}`, "confirmed_heading"},
		{`{"confirmed_heading":"two\nlines"}`, "confirmed_heading"},
		{`{"confirmed_text":"` + strings.Repeat("t", 1001) + `"}`, "confirmed_text"},
		{`{"test_recipients":["not an address"]}`, "test_recipients"},
		{`{"test_recipients":[` + strings.Join(many, ",") + `]}`, "test_recipients"},
		{`{"test_recipients":"team@example.com"}`, "test_recipients"},
	} {
		code, out := sendJSON(t, "PUT", one.srv.URL+"/api/settings", c.body)
		if code != http.StatusBadRequest || !strings.Contains(out, c.field) {
			t.Errorf("%.60s: %d %s, want 400 naming %s", c.body, code, out, c.field)
		}
	}
	if got := readSettings(t, one); !reflect.DeepEqual(got, saved) {
		t.Fatalf("a refused save changed the settings: %+v, want %+v", got, saved)
	}
	if code, body := sendJSON(t, "PUT", one.srv.URL+"/api/settings", `{"test_recipients":[]}`); code != 200 || !strings.Contains(body, `"test_recipients":[]`) {
		t.Fatalf("emptying the list: %d %s", code, body)
	}
}
