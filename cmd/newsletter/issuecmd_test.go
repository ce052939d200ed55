package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func runIssue(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"issue"}, args...), func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

func issueEnv(redisURL string) map[string]string {
	return map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "issue-cmd-test-secret",
		"NEWSLETTER_BASE_URL": "https://news.example.com", "NEWSLETTER_REQUIRE_POSTAL_ADDRESS": "false"}
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// issuesIn is every issue of the store, as text, to compare before/after.
func issuesIn(t *testing.T, st *store.Redis) string {
	t.Helper()
	list, err := st.ListIssues(context.Background(), "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%+v", list)
}

// TestIssueCommands: create prints the id of a draft holding the file,
// send queues its plan, a second send is refused; preview prints the mail.
func TestIssueCommands(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	env := issueEnv(redisURL)
	md := writeFile(t, "march.md", "Hello **readers**, see [the notes](https://example.com/notes).\n\n<script>alert(1)</script>\n")

	code, out, errOut := runIssue(t, env, "create", "--subject", "Our March letter", "--topic", "digest", "--topic", "updates", "--preheader", "Spring", md)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("create printed %q, want the id", out)
	}
	is, err := st.Issue(ctx, id)
	if err != nil || is.Subject != "Our March letter" || is.Preheader != "Spring" || !strings.Contains(is.Body, "Hello **readers**") ||
		strings.Join(is.Topics, ",") != "digest,updates" || is.Status != store.IssueDraft {
		t.Fatalf("stored issue %+v %v", is, err)
	}

	code, out, errOut = runIssue(t, env, "preview", strconv.FormatInt(id, 10), "--format", "text", "--topic", "updates")
	// The preview's links are test links through the counted redirect,
	// carrying their target (engage.Keys.TestLink).
	if code != 0 || !strings.Contains(out, "Hello readers") || !strings.Contains(out, "https://news.example.com/r/") ||
		!strings.Contains(out, "?u="+url.QueryEscape("https://example.com/notes")) || strings.Contains(out, "**") {
		t.Fatalf("preview text: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runIssue(t, env, "preview", strconv.FormatInt(id, 10))
	if code != 0 || !strings.Contains(out, "<strong>readers</strong>") || strings.Contains(out, "<script>") {
		t.Fatalf("preview html: exit %d\n%s\n%s", code, out, errOut)
	}

	// Nobody reads either topic yet: the send says so and changes nothing.
	code, _, errOut = runIssue(t, env, "send", strconv.FormatInt(id, 10))
	if code == 0 || !strings.Contains(errOut, "0 readers") {
		t.Fatalf("send to nobody: exit %d: %s", code, errOut)
	}
	if is, _ := st.Issue(ctx, id); is.Status != store.IssueDraft {
		t.Fatalf("a refused send moved the issue to %s", is.Status)
	}
	code, out, errOut = runIssue(t, env, "send", strconv.FormatInt(id, 10), "--force")
	if code != 0 || !strings.Contains(out, "sending to 0 readers") {
		t.Fatalf("send: exit %d: %s %s", code, out, errOut)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 1)); err != nil {
		t.Fatalf("the plan is not queued: %v", err)
	}
	before := issuesIn(t, st)
	code, _, errOut = runIssue(t, env, "send", strconv.FormatInt(id, 10))
	if code == 0 || !strings.Contains(errOut, "is sending") {
		t.Fatalf("second send: exit %d: %s", code, errOut)
	}
	if after := issuesIn(t, st); after != before {
		t.Fatalf("the refused send changed the issue:\n%s\n%s", before, after)
	}

	// At a time, and at a local hour.
	later := writeFile(t, "later.md", "Later.")
	for _, c := range []struct {
		args   []string
		status string
	}{
		{[]string{"--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--force"}, store.IssueScheduled},
		{[]string{"--local-time", "09:00", "--force"}, store.IssueScheduled},
	} {
		code, out, errOut := runIssue(t, env, "create", "--subject", "Later", "--topic", "digest", later)
		if code != 0 {
			t.Fatalf("create: %s", errOut)
		}
		id := strings.TrimSpace(out)
		if code, out, errOut := runIssue(t, env, append([]string{"send", id}, c.args...)...); code != 0 || !strings.Contains(out, c.status) {
			t.Fatalf("send %v: exit %d %s %s", c.args, code, out, errOut)
		}
		n, _ := strconv.ParseInt(id, 10, 64)
		if is, _ := st.Issue(ctx, n); is.Status != c.status || (c.args[0] == "--local-time" && is.LocalTime != "09:00") {
			t.Fatalf("after send %v: %+v", c.args, is)
		}
	}
}

// TestIssueCommandsBadInput: each bad input is a clear error, a non-zero
// exit, and nothing stored or queued.
func TestIssueCommandsBadInput(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	st := versionedStore(t, rdb)
	env := issueEnv(redisURL)
	md := writeFile(t, "ok.md", "Hello")
	big := writeFile(t, "big.md", strings.Repeat("a", 512<<10+1))
	code, out, errOut := runIssue(t, env, "create", "--subject", "Draft", "--topic", "digest", md)
	if code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	id := strings.TrimSpace(out)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	queued := func() int {
		info, err := insp.GetQueueInfo(tasks.QueueCritical)
		if err != nil {
			return 0
		}
		return info.Size
	}
	before, beforeQueued := issuesIn(t, st), queued()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--subject", "S", "--topic", "nope", md}, `unknown topic "nope"`},
		{[]string{"create", "--subject", "S", md}, "name at least one topic"},
		{[]string{"create", "--subject", " ", "--topic", "digest", md}, "subject: one line"},
		{[]string{"create", "--subject", "a\r\nBcc: x@example.com", "--topic", "digest", md}, "subject: one line"},
		{[]string{"create", "--subject", strings.Repeat("x", 201), "--topic", "digest", md}, "subject: one line"},
		{[]string{"create", "--subject", "S", "--topic", "digest", big}, "over 524288 bytes"},
		{[]string{"create", "--subject", "S", "--topic", "digest", filepath.Join(t.TempDir(), "missing.md")}, "no such file"},
		{[]string{"create", "--subject", "S", "--topic", "digest"}, "give one Markdown file"},
		{[]string{"create", "--subject", "S", "--topic", "digest", md, md}, "give one Markdown file"},
		{[]string{"send", id, "--at", "2020-01-01T09:00:00Z"}, "a time in the future"},
		{[]string{"send", id, "--at", "tomorrow"}, "RFC 3339"},
		{[]string{"send", id, "--local-time", "25:00"}, "HH:MM"},
		{[]string{"send", id, "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--local-time", "09:00"}, "not both"},
		{[]string{"send", "999"}, "no such issue"},
		{[]string{"send", "x"}, "not an issue id"},
		{[]string{"send"}, "give one issue id"},
		{[]string{"preview", id, "--topic", "updates"}, "one of the issue's topics"},
		{[]string{"preview", id, "--format", "pdf"}, "format: html, text or eml"},
		{[]string{"preview", "999"}, "no such issue"},
		{[]string{"publish", id}, "unknown subcommand"},
	} {
		code, _, errOut := runIssue(t, env, c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want non-zero and %q", c.args, code, errOut, c.want)
		}
	}
	if after := issuesIn(t, st); after != before || queued() != beforeQueued {
		t.Fatalf("bad input changed something:\n%s\n%s", before, after)
	}
	// Without the service's Redis the commands would write to a throwaway one.
	if code, _, errOut := runIssue(t, map[string]string{}, "create", "--subject", "S", "--topic", "digest", md); code == 0 || !strings.Contains(errOut, "NEWSLETTER_REDIS_URL") {
		t.Fatalf("embedded: exit %d %s", code, errOut)
	}
}

// TestIssuePreviewCommandIsTheAPIPreview: the command prints exactly what
// the running service's preview route answers.
func TestIssuePreviewCommandIsTheAPIPreview(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{"NEWSLETTER_ADMIN_TOKEN": "issue-cmd-admin-token-0123456789"})
	svc := startService(t, env, "serve")
	md := writeFile(t, "a.md", "# Title\n\nA [link](https://example.com/x) and *emphasis*.\n")
	for _, format := range []string{"html", "text"} {
		// The personal links carry their expiry in seconds, and the
		// service keeps an issue's preview once rendered
		// (api.CachePreviews): each try is a new issue, rendered by the
		// API and then by the command. A difference when both renders
		// fell in one second (the service runs in this process, on this
		// clock) is a real one and fails at once; a difference across a
		// second's boundary is tried again, and one that persists still
		// fails, with the last pair.
		poll.Until(t, poll.BusyMachine, func() error {
			code, out, errOut := runIssue(t, env, "create", "--subject", "Same", "--topic", "digest", md)
			if code != 0 {
				t.Fatalf("create: %s", errOut)
			}
			id := strings.TrimSpace(out)
			began := time.Now()
			apiBody := apiPreview(t, svc.base, id, format, env["NEWSLETTER_ADMIN_TOKEN"])
			code, out, errOut = runIssue(t, env, "preview", id, "--format", format)
			if code == 0 && out == string(apiBody) {
				return nil
			}
			err := fmt.Errorf("%s: command preview (exit %d, %s) differs from the API's:\n--- command\n%s\n--- api\n%s", format, code, errOut, out, apiBody)
			if code != 0 || time.Now().Unix() == began.Unix() {
				t.Fatal(err)
			}
			return err
		})
	}
}

// apiPreview is the running service's preview of issue id in format.
func apiPreview(t *testing.T, base, id, format, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/issues/"+id+"/preview?format="+format, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("API preview %s: %d %s", format, resp.StatusCode, body)
	}
	return body
}

// TestHelpListsIssueCommands: the help names the three commands.
func TestHelpListsIssueCommands(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, io.Discard); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"issue create", "issue send", "issue preview", "--local-time", "--format"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestIssuePreviewEMLNeedsNoTransport: with only the settings the quick
// start exports (Redis and the secret, no NEWSLETTER_SMTP_URL), an eml
// preview prints the whole message, as html and text do: a preview
// renders, it sends nothing.
func TestIssuePreviewEMLNeedsNoTransport(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "issue-cmd-test-secret"}
	md := writeFile(t, "eml.md", "Hello **readers**.\n")
	code, out, errOut := runIssue(t, env, "create", "--subject", "Our March letter", "--topic", "updates", md)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	code, out, errOut = runIssue(t, env, "preview", id, "--format", "eml")
	if code != 0 {
		t.Fatalf("eml preview without NEWSLETTER_SMTP_URL: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Subject: Our March letter", "To: <reader@example.com>", "List-Unsubscribe-Post: List-Unsubscribe=One-Click", "multipart/alternative", "<strong>readers</strong>"} {
		if !strings.Contains(out, want) {
			t.Errorf("the eml preview lacks %q:\n%s", want, out)
		}
	}
}

// TestIssuePreviewOut: docs/publishing.md's steps (create for two topics, preview
// as a reader of the second into a file) work, and --out writes the file
// only when the preview succeeds: a refused preview leaves no empty file,
// and an earlier preview in that file stays as it was.
func TestIssuePreviewOut(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	env := issueEnv(redisURL)
	md := writeFile(t, "march.md", "Hello **readers**.\n")
	code, out, errOut := runIssue(t, env, "create", "--subject", "Our March letter", "--topic", "updates", "--topic", "digest", md)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	dir := t.TempDir()
	file := filepath.Join(dir, "preview.html")
	// The personal links carry their expiry in seconds: two renders are
	// equal when made in one second (the command runs in this process, on
	// this clock). A difference then fails at once; one across a second's
	// boundary is tried again, and one that persists still fails.
	var stdoutPreview string
	poll.Until(t, poll.BusyMachine, func() error {
		began := time.Now()
		var code int
		var errOut string
		code, stdoutPreview, errOut = runIssue(t, env, "preview", id, "--topic", "digest")
		if code != 0 {
			t.Fatalf("preview to stdout: exit %d: %s", code, errOut)
		}
		code, out, errOut := runIssue(t, env, "preview", id, "--topic", "digest", "--out", file)
		if code != 0 || out != "" {
			t.Fatalf("preview --out: exit %d, stdout %q: %s", code, out, errOut)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "<strong>readers</strong>") {
			t.Fatalf("the file holds %q, want the preview", b)
		}
		if string(b) == stdoutPreview {
			return nil
		}
		err = fmt.Errorf("the file holds %q, want the preview on stdout %q", b, stdoutPreview)
		if time.Now().Unix() == began.Unix() {
			t.Fatal(err)
		}
		return err
	})

	// A topic the issue is not for: refused, and the file is untouched.
	code, _, errOut = runIssue(t, env, "preview", id, "--topic", "events", "--out", file)
	if code == 0 || !strings.Contains(errOut, "one of the issue's topics") {
		t.Fatalf("preview of a topic the issue is not for: exit %d: %s", code, errOut)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != stdoutPreview {
		t.Fatalf("a refused preview changed the earlier file: %q %v", b, err)
	}
	// Into a new file: none is made.
	fresh := filepath.Join(dir, "fresh.html")
	if code, _, errOut := runIssue(t, env, "preview", id, "--topic", "events", "--out", fresh); code == 0 {
		t.Fatalf("preview of a topic the issue is not for: exit 0: %s", errOut)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a refused preview left %s: %v", fresh, err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Fatalf("the directory holds %v (%v), want the one preview", entries, err)
	}
}
