package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func runImport(t *testing.T, redisURL string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "import-test-secret-01"}
	code := run(context.Background(), append([]string{"import", "--quiet"}, args...), func(k string) string { return env[k] }, &out, &errb)
	if code != 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return code, out.String()
}

func TestImport(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	st.Subscribe(ctx, store.SubscribeRequest{Email: "left@example.com", Activate: true})
	st.Unsubscribe(ctx, "left@example.com")

	file := filepath.Join(t.TempDir(), "list.csv")
	os.WriteFile(file, []byte(strings.Join([]string{
		"email,name,timezone",
		"ann@example.com,Ann,Europe/Berlin",
		" BOB@example.com ,Bob",
		"not-an-address",
		"carol@example.com,Carol,Mars/Base",
		"ann@example.com,Ann again",
		"left@example.com",
		`"dave@example.com","Dave, Jr.",America/New_York`,
		"erin@example.com,Erin\u202e",
		"fay@example.com,F\x00ay",
	}, "\n")), 0o644)

	code, out := runImport(t, redisURL, file)
	if code != 0 || !strings.Contains(out, "3 added as active, 2 already present, 4 invalid") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "line 4: invalid address") || !strings.Contains(out, "line 5: unknown time zone Mars/Base") ||
		!strings.Contains(out, "line 9: invalid name") || !strings.Contains(out, "line 10: invalid name") {
		t.Fatalf("invalid rows not named by line:\n%s", out)
	}
	for _, e := range []string{"erin@example.com", "fay@example.com"} {
		if _, err := st.Get(ctx, e); err == nil {
			t.Fatalf("%s was imported with a control or format character in the name", e)
		}
	}
	ann, _ := st.Get(ctx, "ann@example.com")
	dave, _ := st.Get(ctx, "dave@example.com")
	if ann.Status != store.Active || ann.Timezone != "Europe/Berlin" || ann.Name != "Ann" || dave.Name != "Dave, Jr." {
		t.Fatalf("imported: %+v %+v", ann, dave)
	}
	if left, _ := st.Get(ctx, "left@example.com"); left.Status != store.Unsubscribed {
		t.Fatal("an import re-subscribed someone who left")
	}
	// Again: nothing new.
	if _, out := runImport(t, redisURL, file); !strings.Contains(out, "0 added as active, 5 already present") {
		t.Fatalf("re-run:\n%s", out)
	}

	pending := filepath.Join(t.TempDir(), "pending.csv")
	os.WriteFile(pending, []byte("eve@example.com\nfrank@example.com\n"), 0o644)
	if code, out := runImport(t, redisURL, "--pending", pending); code != 0 || !strings.Contains(out, "2 added as pending") {
		t.Fatalf("--pending: %d\n%s", code, out)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if info, err := insp.GetTaskInfo(tasks.QueueTransactional, "confirm:eve@example.com"); err != nil || info.Type != tasks.TypeConfirmEmail {
		t.Fatalf("no confirmation queued: %v", err)
	}
	if eve, _ := st.Get(ctx, "eve@example.com"); eve.Status != store.Pending {
		t.Fatalf("eve is %s", eve.Status)
	}

	if code, _ := runImport(t, redisURL, filepath.Join(t.TempDir(), "missing.csv")); code == 0 {
		t.Fatal("a missing file imported fine")
	}
}

// The topics column: ids separated by spaces or semicolons (or commas in
// a quoted field), checked against the topics file; empty gives the
// default topics; an unknown id makes the row invalid. A header row may
// put the columns in any order.
func TestImportTopics(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "list.csv")
	os.WriteFile(file, []byte(strings.Join([]string{
		"topics,email",
		"updates,upd@example.com",
		`"digest, updates",both@example.com`,
		"digest;updates,semi@example.com",
		",default@example.com",
		"sports,sport@example.com",
	}, "\n")), 0o644)
	code, out := runImport(t, redisURL, file)
	if code != 0 || !strings.Contains(out, "4 added as active, 0 already present, 1 invalid") || !strings.Contains(out, `line 6: unknown topic "sports"`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for email, want := range map[string]string{
		"upd@example.com": "updates", "both@example.com": "digest,updates", "semi@example.com": "digest,updates", "default@example.com": "digest,updates",
	} {
		sub, err := st.Get(ctx, email)
		if err != nil || strings.Join(sub.Topics, ",") != want {
			t.Fatalf("%s: %+v %v, want topics %s", email, sub, err, want)
		}
	}
	if _, err := st.Get(ctx, "sport@example.com"); err == nil {
		t.Fatal("a row with an unknown topic was stored")
	}
}

// TestImportProgressCountsSubscriberRows: the progress bar counts the rows
// of subscribers, valid or not, and not the header row; its last count is
// the summary's added + present + invalid.
func TestImportProgressCountsSubscriberRows(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	file := filepath.Join(t.TempDir(), "list.csv")
	os.WriteFile(file, []byte("email,name\nann@example.com,Ann\nbob@example.com,Bob\nnot-an-address,X\n"), 0o644)
	var out, errb bytes.Buffer
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "import-test-secret-01"}
	if code := run(context.Background(), []string{"import", file}, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "2 added as active, 0 already present, 1 invalid") {
		t.Fatalf("summary:\n%s", out.String())
	}
	draws := strings.Split(strings.TrimSpace(errb.String()), "\r")
	if last := draws[len(draws)-1]; !strings.Contains(last, "100%  3 rows ") {
		t.Fatalf("the progress bar's last count is %q, want 100%% and 3 rows (the header is no subscriber)", last)
	}
}

// TestHelpListsImportColumns: `newsletter help` names every column the
// import reads, topics included, and how to import as pending.
func TestHelpListsImportColumns(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	_, importHelp, ok := strings.Cut(out.String(), "\n  import FILE")
	importHelp, _, _ = strings.Cut(importHelp, "\n  digest")
	if !ok {
		t.Fatalf("help has no import line:\n%s", out.String())
	}
	for _, want := range []string{"email", "name", "timezone", "topics", "header row", "--pending"} {
		if !strings.Contains(importHelp, want) {
			t.Errorf("the help of import lacks %q:\n%s", want, importHelp)
		}
	}
}

// An address erased at its owner's request is skipped by an import, and
// the summary counts it without naming it.
func TestImportSkipsErased(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	// The service's store: erased addresses keyed as the binary keys them.
	st := versionedStore(t, rdb).WithErasure(logredact.New([]byte("import-test-secret-01")).Hash)
	ctx := context.Background()
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "gone@example.com", Name: "Gone", Activate: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Erase(ctx, "gone@example.com"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "list.csv")
	if err := os.WriteFile(file, []byte("gone@example.com,Gone\nnew@example.com,New\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runImport(t, redisURL, file)
	if code != 0 || !strings.Contains(out, "1 added as active, 0 already present, 0 invalid") ||
		!strings.Contains(out, "1 skipped: erased at the person's request") || strings.Contains(out, "gone@") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := st.Get(ctx, "gone@example.com"); err == nil {
		t.Fatal("the import brought an erased address back")
	}
}

// The publisher's file: 2,006 lines, an unbalanced quote on line 51. The
// command rejects line 51 with its reason and reads on from line 52:
// every line is accounted for.
func TestImportBrokenQuoteAccountsForEveryLine(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	var b strings.Builder
	b.WriteString("email,name\n")
	for line := 2; line <= 2006; line++ {
		if line == 51 {
			fmt.Fprintf(&b, "r%04d@example.com,\"Broken\n", line)
			continue
		}
		fmt.Fprintf(&b, "r%04d@example.com,Person %d\n", line, line)
	}
	file := filepath.Join(t.TempDir(), "list.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runImport(t, redisURL, file)
	if code != 0 || !strings.Contains(out, "2004 added as active, 0 already present, 1 invalid") ||
		!strings.Contains(out, "2005 rows read of 2006 lines (1 header, 0 blank)") || !strings.Contains(out, "line 51: unbalanced quote") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := store.NewRedis(rdb).Get(context.Background(), "r2006@example.com"); err != nil {
		t.Fatalf("the last row: %v", err)
	}
}

// A service started with a topics file imports its topics into Redis;
// the command, run from a shell with another topics file (or none), checks
// and writes the stored ones, not its own, and says so.
func TestImportUsesTheStoredTopics(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	topicsFile := filepath.Join(t.TempDir(), "topics.yaml")
	if err := os.WriteFile(topicsFile, []byte("topics:\n  - {id: digest, name: Weekly digest, default: true}\n  - {id: updates, name: Updates}\n  - {id: essays, name: Long essays}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := startService(t, map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "import-test-secret-01",
		"NEWSLETTER_TOPICS_FILE": topicsFile, "NEWSLETTER_DEV_MAILBOX": "true", "NEWSLETTER_ADMIN_TOKEN": "import-admin-token-0123"}, "api")
	svc.stop(t)

	file := filepath.Join(t.TempDir(), "list.csv")
	if err := os.WriteFile(file, []byte("email,topics\nessay@example.com,essays\ndefault@example.com,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("topics:\n  - {id: digest, name: Weekly digest, default: true}\n  - {id: updates, name: Updates, default: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "import-test-secret-01", "NEWSLETTER_TOPICS_FILE": other}
	if code := run(context.Background(), []string{"import", "--quiet", file}, func(k string) string { return env[k] }, &out, &errb); code != 0 ||
		!strings.Contains(out.String()+errb.String(), "2 added as active, 0 already present, 0 invalid") ||
		!strings.Contains(errb.String(), "the stored ones are used") {
		t.Fatalf("a differing topics file: exit %d\n%s%s", code, out.String(), errb.String())
	}
	set, err := topics.Load(topicsFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := versionedStore(t, rdb).WithTopics(set)
	for email, want := range map[string]string{"essay@example.com": "essays", "default@example.com": "digest"} {
		sub, err := st.Get(context.Background(), email)
		if err != nil || strings.Join(sub.Topics, ",") != want {
			t.Fatalf("%s: %+v %v, want topics %s (the stored ones)", email, sub, err, want)
		}
	}
}

// A Mailchimp export is recognised and its mapping printed; --map maps a
// column the recognition left out, --generic reads the header by our own
// names (where Mailchimp's "Email Address" is still the address).
func TestImportRecognisesAnExport(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	file := filepath.Join(t.TempDir(), "subscribed_members_export.csv")
	os.WriteFile(file, []byte("\ufeff\"Email Address\",\"First Name\",\"Last Name\",\"MEMBER_RATING\",\"OPTIN_TIME\",\"Plan\",\"LEID\"\r\n"+
		"ann@example.com,Ann,Lee,2,\"2021-03-04 10:11:12\",Gold,1\r\n"), 0o644)
	code, out := runImport(t, redisURL, "--map", "Plan=tags", file)
	if code != 0 || !strings.Contains(out, "source: mailchimp") || !strings.Contains(out, `"First Name" -> first_name`) ||
		!strings.Contains(out, `"Plan" -> tags`) || !strings.Contains(out, `"MEMBER_RATING" -> (left out)`) || !strings.Contains(out, "1 added as active") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code, out := runImport(t, redisURL, "--map", "Nope=email", file); code == 0 || strings.Contains(out, "added") {
		t.Fatalf("an unknown column: exit %d\n%s", code, out)
	}
	if code, out := runImport(t, redisURL, "--generic", file); code != 0 || !strings.Contains(out, "source: generic") || !strings.Contains(out, "1 already present") {
		t.Fatalf("--generic: exit %d\n%s", code, out)
	}
}
