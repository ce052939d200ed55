package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// startImportWorker runs the worker that reads the console's uploads
// (import:run), on the console's Redis.
func startImportWorker(t *testing.T, e *env) {
	t.Helper()
	client := asynq.NewClientFromRedisClient(e.rdb)
	runner := worker.NewHandlers(worker.Deps{Imports: csvimport.NewJobs(e.rdb), ImportStore: e.st, Queue: client, Log: quietLog(),
		Audit: audit.NewTrail(e.st, logredact.New([]byte("test-secret")), quietLog(), nil)}).Imports
	w := worker.New(e.rdb, worker.Config{ShutdownTimeout: time.Second, PollInterval: 50 * time.Millisecond, Log: quietLog(),
		Lanes: []worker.Lane{{Name: tasks.LaneEmail, Concurrency: 1}}},
		worker.Handlers{Imports: runner})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
}

// importJSON is the import's status as the page's script reads it.
type importJSON struct {
	State                               string
	Lines, Read, Added, Present, Erased int64
	LinesDone                           int64 `json:"lines_done"`
	RejectedTotal                       int64 `json:"rejected_total"`
	RejectedMore                        int64 `json:"rejected_more"`
	Rejected                            []struct {
		Line   int64
		Reason string
	}
}

// waitImport polls the import's page as its script does until it ends;
// the raw JSON of every poll is kept, to check that rejected is never null.
func waitImport(t *testing.T, b *browser, location string) (importJSON, []string) {
	t.Helper()
	var s importJSON
	var raws []string
	poll.Until(t, poll.BusyMachine, func() error {
		req, _ := http.NewRequest("GET", b.e.srv.URL+location, nil)
		req.Header.Set("Accept", "application/json")
		got := b.do(req)
		raws = append(raws, got.body)
		s = importJSON{}
		if err := json.Unmarshal([]byte(got.body), &s); err != nil {
			return err
		}
		if s.State == csvimport.StateRunning {
			return fmt.Errorf("state %q", s.State)
		}
		return nil
	})
	return s, raws
}

func TestImportShowsProgressAndRejectedLines(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	if p := upload(t, b, "list.xlsx", []byte("PK\x03\x04\x00\x00"), false); p.code != http.StatusUnsupportedMediaType || !strings.Contains(p.body, "not a CSV file") {
		t.Fatalf("xlsx: %d", p.code)
	}
	if p := upload(t, b, "list.csv", []byte("a@example.com\x00\x01\x02"), false); p.code != http.StatusUnsupportedMediaType || !strings.Contains(p.body, "binary") {
		t.Fatalf("binary: %d", p.code)
	}
	if p := upload(t, b, "list.csv", []byte("a@example.com,\xff\xfe\n"), false); p.code != http.StatusUnsupportedMediaType || !strings.Contains(p.body, "UTF-8") {
		t.Fatalf("latin-1: %d", p.code)
	}
	csv := "email,name,timezone\nann@example.com,Ann,Europe/Berlin\nnot-an-address\ncarol@example.com,Carol,Mars/Base\n\"broken@example.com,Br\"oken\ndave@example.com\n"
	p := upload(t, b, "list.csv", []byte(csv), false)
	if p.code != 303 || !strings.HasPrefix(p.location, "/admin/import/") {
		t.Fatalf("upload: %d %q %s", p.code, p.location, p.body)
	}
	// Stored, its mapping shown; confirmed, queued: without a worker it
	// waits, and its JSON has a list of rejected lines, never null.
	confirmMapping(t, b, p.location, nil)
	mustContain(t, "waiting page", b.get(p.location), "running", `data-field="rejected"`, "None.")
	req, _ := http.NewRequest("GET", e.srv.URL+p.location, nil)
	req.Header.Set("Accept", "application/json")
	if waiting := b.do(req); !strings.Contains(waiting.body, `"rejected":[]`) || strings.Contains(waiting.body, "null") {
		t.Fatalf("the waiting import's JSON: %s", waiting.body)
	}
	startImportWorker(t, e)
	s, raws := waitImport(t, b, p.location)
	for _, raw := range raws {
		if strings.Contains(raw, `"rejected":null`) {
			t.Fatalf("rejected is null in %s", raw)
		}
	}
	if s.State != csvimport.StateDone || s.Lines != 6 || s.LinesDone != 6 || s.Read != 5 || s.Added != 2 || s.RejectedTotal != 3 || len(s.Rejected) != 3 ||
		s.Rejected[0].Line != 3 || s.Rejected[0].Reason != "invalid address" {
		t.Fatalf("import: %+v", s)
	}
	mustContain(t, "status page", b.get(p.location), "line 3: invalid address", "line 4: unknown time zone Mars/Base", `<progress max="6" value="6"`)
	if _, err := e.st.Get(t.Context(), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.BusyMachine, "the import's audit entry", func() bool {
		return len(e.audit.actions()) > 0 && e.audit.actions()[0] == "alice subscribers.imported"
	})
}

// The publisher's file: 2,006 lines, an unbalanced quote on line 51.
// Uploaded through the console and read by the worker, line 51 is
// rejected with its reason and the 2,004 other rows are added; the audit
// entry carries the same counts.
func TestImportBrokenQuoteThroughConsole(t *testing.T) {
	e := newEnv(t)
	startImportWorker(t, e)
	b := e.signedIn(t, adminToken)
	var file strings.Builder
	file.WriteString("email,name\n")
	for line := 2; line <= 2006; line++ {
		if line == 51 {
			fmt.Fprintf(&file, "r%04d@example.com,\"Broken\n", line)
			continue
		}
		fmt.Fprintf(&file, "r%04d@example.com,Person %d\n", line, line)
	}
	p := upload(t, b, "list.csv", []byte(file.String()), false)
	if p.code != 303 {
		t.Fatalf("upload: %d %s", p.code, p.body)
	}
	confirmMapping(t, b, p.location, nil)
	s, _ := waitImport(t, b, p.location)
	// A busy machine may fail a batch (a Redis timeout) after it stored
	// some rows: its retry counts those as already present.
	if s.State != csvimport.StateDone || s.Lines != 2006 || s.LinesDone != 2006 || s.Read != 2005 || s.Added+s.Present != 2004 ||
		s.RejectedTotal != 1 || len(s.Rejected) != 1 || s.Rejected[0].Line != 51 || !strings.Contains(s.Rejected[0].Reason, "unbalanced quote") {
		t.Fatalf("import: %+v", s)
	}
	if _, err := e.st.Get(t.Context(), "r2006@example.com"); err != nil {
		t.Fatalf("the last row: %v", err)
	}
	// The worker writes the import's audit entry after its last
	// checkpoint: the status page can say done a moment before it.
	poll.Until(t, poll.BusyMachine, func() error {
		entries, err := e.st.AuditEntries(t.Context(), "", 1)
		if err != nil || len(entries) != 1 || !strings.Contains(entries[0].Detail, fmt.Sprintf("2005 rows read: %d added as active, %d already present, 0 erased skipped, 1 rejected (done)", s.Added, s.Present)) {
			return fmt.Errorf("audit: %+v %v", entries, err)
		}
		return nil
	})
}

// confirmMapping reads the import's mapping step and posts it back, with
// the columns in change mapped otherwise (by position).
func confirmMapping(t *testing.T, b *browser, location string, change map[int]string) page {
	t.Helper()
	shown := b.get(location)
	if shown.code != 200 || !strings.Contains(shown.body, "Import with this mapping") {
		t.Fatalf("the mapping step: %d\n%s", shown.code, shown.body)
	}
	form := url.Values{}
	for _, m := range selectedCol.FindAllStringSubmatch(shown.body, -1) {
		form.Set(m[1], m[2])
	}
	for i, to := range change {
		form.Set(fmt.Sprintf("col%d", i), to)
	}
	p := b.post(location, form)
	if p.code != 303 || p.location != location {
		t.Fatalf("confirm: %d %q\n%s", p.code, p.location, p.body)
	}
	return p
}

// selectedCol finds each column's select and the option selected in it.
var selectedCol = regexp.MustCompile(`(?s)name="(col\d+)">.*?<option value="([^"]*)" selected>`)

// A Mailchimp export uploaded shows its mapping step: the source, each
// column with its field, the first rows (five at most); nothing runs
// until it is confirmed. Confirmed with a column mapped otherwise, the
// import reads it so; a mapping without an address column is refused.
func TestImportMappingStep(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	var file strings.Builder
	file.WriteString("\ufeff\"Email Address\",\"First Name\",\"Last Name\",\"Plan\",\"MEMBER_RATING\",\"OPTIN_TIME\",\"LEID\",\"TAGS\"\r\n")
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&file, "p%d@example.com,Pat,Row%d,gold,2,\"2021-03-04 10:11:12\",%d,\"\"\"Early Bird\"\"\"\r\n", i, i, i)
	}
	p := upload(t, b, "subscribed_members_export.csv", []byte(file.String()), false)
	if p.code != 303 {
		t.Fatalf("upload: %d %s", p.code, p.body)
	}
	shown := b.get(p.location)
	mustContain(t, "mapping step", shown, "<strong>mailchimp</strong>", "<th scope=\"col\">Email Address</th>", "<td>p5@example.com</td>",
		`<option value="first_name" selected>`, `<option value="last_name" selected>`, `<option value="tags" selected>`)
	if strings.Contains(shown.body, "p6@example.com") {
		t.Fatal("the preview shows more than five rows")
	}
	if st, err := csvimport.NewJobs(e.rdb).Status(t.Context(), strings.TrimPrefix(p.location, "/admin/import/")); err != nil || st.State != csvimport.StateMapping {
		t.Fatalf("before its confirmation: %+v %v", st, err)
	}
	if bad := b.post(p.location, url.Values{"col0": {""}, "col1": {"name"}}); bad.code != 400 || !strings.Contains(bad.body, "no column is mapped to email") {
		t.Fatalf("a mapping without email: %d", bad.code)
	}
	// A select sent twice, or an undeclared custom field: 400, nothing
	// queued (the probe found both taken).
	if twice := b.post(p.location, url.Values{"col0": {"name", "email"}}); twice.code != 400 || !strings.Contains(twice.body, "given 2 times") {
		t.Fatalf("col0 twice: %d", twice.code)
	}
	if undeclared := b.post(p.location, url.Values{"col0": {"email"}, "col3": {"field.nope"}}); undeclared.code != 400 || !strings.Contains(undeclared.body, "no custom field") {
		t.Fatalf("an undeclared custom field: %d", undeclared.code)
	}
	if st, err := csvimport.NewJobs(e.rdb).Status(t.Context(), strings.TrimPrefix(p.location, "/admin/import/")); err != nil || st.State != csvimport.StateMapping {
		t.Fatalf("after refused mappings: %+v %v", st, err)
	}
	startImportWorker(t, e)
	// The Plan column becomes the tags, TAGS is left out.
	confirmMapping(t, b, p.location, map[int]string{3: "tags", 7: ""})
	s, _ := waitImport(t, b, p.location)
	if s.State != csvimport.StateDone || s.Added != 7 {
		t.Fatalf("import: %+v", s)
	}
	got, err := e.st.Get(t.Context(), "p7@example.com")
	if err != nil || got.Name != "Pat Row7" || len(got.Tags) != 1 || got.Tags[0] != "gold" {
		t.Fatalf("p7: %+v %v", got, err)
	}
}

// TestImportMappingStepBounds: a file of more columns than
// csvimport.MaxColumns offers only those and says so; a first line over
// csvimport.MaxLine is said to be left out (the probe: 65,001 columns
// made a 40 MB page; a long header showed as a file without one).
func TestImportMappingStepBounds(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	cols := make([]string, csvimport.MaxColumns+50)
	for i := range cols {
		cols[i] = fmt.Sprintf("c%d", i)
	}
	cols[0] = "email"
	wide := upload(t, b, "wide.csv", []byte(strings.Join(cols, ",")+"\r\na@example.com\r\n"), false)
	if wide.code != 303 {
		t.Fatalf("upload: %d %s", wide.code, wide.body)
	}
	shown := b.get(wide.location)
	mustContain(t, "a wide file", shown, fmt.Sprintf("The file has %d columns: only the first %d", len(cols), csvimport.MaxColumns))
	if n := strings.Count(shown.body, "<select "); n != csvimport.MaxColumns {
		t.Fatalf("%d selects, want %d", n, csvimport.MaxColumns)
	}
	long := upload(t, b, "long.csv", []byte("email,"+strings.Repeat("x", csvimport.MaxLine)+"\r\na@example.com\r\n"), false)
	if long.code != 303 {
		t.Fatalf("upload: %d %s", long.code, long.body)
	}
	mustContain(t, "a long first line", b.get(long.location), "first line is longer than")
}
