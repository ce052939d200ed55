package worker

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// startListWorker runs a worker with the list's jobs (small pages, so a
// few people make several pages and chunks).
func (e *importEnv) startListWorker(t *testing.T, added ...channels.Channel) *listjobs.Jobs {
	t.Helper()
	jobs := listjobs.NewJobs(e.rdb)
	h := NewHandlers(Deps{ListJobs: jobs, ListStore: e.st, Queue: e.client, Audit: e.trail, Log: discard, Now: time.Now, Channels: added})
	h.ListJobs.Runner.Page = 7
	w := New(e.rdb, Config{ShutdownTimeout: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond, Log: discard,
		Lanes: []Lane{{Name: tasks.LaneEmail, Concurrency: 2}}},
		Handlers{ListJobs: h.ListJobs})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	return jobs
}

// runJob queues job and waits for it to end.
func runJob(t *testing.T, e *importEnv, jobs *listjobs.Jobs, job listjobs.Job) listjobs.Job {
	t.Helper()
	ctx := context.Background()
	job, err := jobs.Create(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	kind := tasks.ExportRun
	if job.Kind == listjobs.KindBulk {
		kind = tasks.SubscribersBulk
	}
	if _, err := e.client.EnqueueContext(ctx, kind.New(tasks.ListJobPayload{ID: job.ID})); err != nil {
		t.Fatal(err)
	}
	var got listjobs.Job
	poll.True(t, 20*time.Second, "the job ends", func() bool {
		got, err = jobs.Get(ctx, job.ID)
		return err == nil && got.State != listjobs.StateRunning
	})
	if got.State != listjobs.StateDone {
		t.Fatalf("job %+v", got)
	}
	return got
}

func exportCSV(t *testing.T, jobs *listjobs.Jobs, job listjobs.Job) []byte {
	t.Helper()
	var out bytes.Buffer
	for i := range job.Chunks {
		b, err := jobs.Chunk(context.Background(), job.ID, i)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	return out.Bytes()
}

// The export writes every selected person, once, in a CSV the importer
// reads back unchanged into an empty store: the active people come back
// as they were (address, name with its quotes and commas, time zone,
// topics); those whose subscription ended are not imported.
func TestExportImportRoundTrip(t *testing.T) {
	e := newImportEnv(t)
	jobs := e.startListWorker(t)
	ctx := context.Background()
	type person struct {
		email, name, tz string
		topics, tags    []string
		fields          map[string]string
	}
	declare := func() {
		for _, d := range []store.FieldDef{{Name: "company", Type: store.FieldText}, {Name: "seats", Type: store.FieldNumber}} {
			if _, err := e.st.DefineField(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	declare()
	var want []person
	for i := range 23 {
		p := person{fmt.Sprintf("rt%02d@example.com", i), fmt.Sprintf(`Ann "A, %d" O'Neil`, i), "Europe/Berlin", []string{"digest", "updates"}, nil, nil}
		if i%3 == 0 {
			p.name, p.tz, p.topics = "", "", []string{"updates"}
		}
		if i%5 == 0 {
			p.name = "=SUM(A1) looks like a formula"
		}
		// Names a public signup may give that a spreadsheet would run
		// (and one that looks guarded already): inert in the file, the
		// same after the import.
		if dangerous := []string{"", "+1 (555) Ann", "-Ann", "@Ann", "=HYPERLINK(\"http://x\",\"y\")", "'=already quoted", "''+twice"}; i%7 < len(dangerous) && i%7 > 0 {
			p.name = dangerous[i%7]
		}
		if i%2 == 0 {
			p.tags, p.fields = []string{"beta", "vip"}, map[string]string{"company": fmt.Sprintf("Acme; \"%d\", Ltd", i), "seats": fmt.Sprint(i)}
		}
		if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: p.email, Name: p.name, Timezone: p.tz, Topics: p.topics, Activate: true, Source: store.SourceForm,
			Tags: p.tags, Fields: p.fields}); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if _, err := e.st.Unsubscribe(ctx, "left@example.com"); err == nil {
		t.Fatal("unsubscribed nobody")
	}
	if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: "left@example.com", Activate: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Unsubscribe(ctx, "left@example.com"); err != nil {
		t.Fatal(err)
	}

	job := runJob(t, e, jobs, listjobs.Job{Kind: listjobs.KindExport, Total: 24})
	data := exportCSV(t, jobs, job)
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if job.Done != 24 || len(rows) != 25 || !slices.Equal(rows[0][:6], []string{"email", "name", "timezone", "topics", "tags", "status"}) ||
		!slices.Equal(rows[0][len(rows[0])-2:], []string{"field.company", "field.seats"}) {
		t.Fatalf("export: %d done, %d rows, header %v", job.Done, len(rows), rows[0])
	}
	for _, r := range rows[1:] {
		if name := r[1]; name != "" && strings.ContainsRune("=+-@\t\r", rune(name[0])) {
			t.Fatalf("row %v: the name %q starts a spreadsheet formula", r, name)
		}
		if r[0] == "rt03@example.com" && (r[5] != "active" || r[9] != "form" || r[6] == "" || r[7] == "" || r[10] == "") {
			t.Fatalf("row %v: status, times and consent", r)
		}
	}

	// Into an empty store, whose publisher declared the same fields.
	if err := e.rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	declare()
	im := &csvimport.Importer{Store: e.st, Queue: e.client, Now: time.Now}
	lines, _ := csvimport.CountLines(bytes.NewReader(data))
	prog, err := im.Run(ctx, bytes.NewReader(data), lines, csvimport.Progress{})
	if err != nil {
		t.Fatal(err)
	}
	if prog.Added != 23 || prog.RejectedTotal() != 1 || !strings.Contains(prog.Rejected[0].Reason, "unsubscribed") {
		t.Fatalf("import: %+v", prog)
	}
	for _, p := range want {
		got, err := e.st.Get(ctx, p.email)
		if err != nil || got.Name != p.name || got.Timezone != p.tz || !slices.Equal(got.Topics, p.topics) || got.Status != store.Active ||
			!slices.Equal(got.Tags, p.tags) || !maps.Equal(got.Fields, p.fields) {
			t.Fatalf("%s after the round trip: %+v %v, want %+v", p.email, got, err, p)
		}
	}
	if _, err := e.st.Get(ctx, "left@example.com"); err == nil {
		t.Fatal("the person who left came back with the import")
	}
}

// A bulk action on a filter runs page by page to its end: the topic is
// added to every active person and nobody else; an erasure stops at the
// count confirmed.
func TestBulkJob(t *testing.T) {
	e := newImportEnv(t)
	chat := newChat() // an added channel that keeps something of a person
	jobs := e.startListWorker(t, chat)
	ctx := context.Background()
	for i := range 20 {
		req := store.SubscribeRequest{Email: fmt.Sprintf("b%02d@example.com", i), Topics: []string{"digest"}, Activate: i%4 != 0}
		if i%4 == 0 {
			req.Outbox = outbox.Entry{ID: "confirm:" + req.Email, Body: []byte("x"), Due: time.Now()}
		}
		if _, err := e.st.Subscribe(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	job := runJob(t, e, jobs, listjobs.Job{Kind: listjobs.KindBulk, Filter: store.Filter{Status: store.Active}, Action: listjobs.ActionAddTopic, Topic: "updates"})
	if job.Done != 15 || job.Changed != 15 {
		t.Fatalf("add_topic: %+v", job)
	}
	page, err := e.st.ListSubscribers(ctx, store.SubscriberQuery{Topic: "updates", Limit: 100})
	if err != nil || page.Total != 15 {
		t.Fatalf("with updates: %d %v", page.Total, err)
	}
	job = runJob(t, e, jobs, listjobs.Job{Kind: listjobs.KindBulk, Filter: store.Filter{Status: store.Pending}, Action: listjobs.ActionErase, Max: 3})
	if job.Changed != 3 || job.Skipped != 2 {
		t.Fatalf("erase, capped at 3: %+v", job)
	}
	if n, _ := e.st.CountSelection(ctx, store.Filter{Status: store.Pending}); n != 2 {
		t.Fatalf("%d pending left, want 2", n)
	}
	if erased := chat.erasedIDs(); len(erased) != 3 {
		t.Fatalf("the added channel erased %v, want the 3 people erased", erased)
	}
	// The job is marked done before its audit entry is written: the
	// entry is waited for.
	var entries []audit.Entry
	poll.True(t, poll.BusyMachine, "the erase job's audit entry", func() bool {
		entries, err = e.st.AuditEntries(ctx, "", 10)
		return err == nil && len(entries) == 2
	})
	if entries[0].Action != listjobs.AuditBulk || !strings.Contains(entries[0].Detail, "3 changed") {
		t.Fatalf("audit: %+v", entries)
	}
}
