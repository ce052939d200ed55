package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestTopicsCommands: a command run on an empty Redis stores nothing (only
// the service's roles make the first import, so a shell's environment
// does not become everyone's) and shows the topics of an earlier release's
// service rather than the built-in ones; `topics import` stores a file's
// as a new version; a file that drops a stored topic is refused and
// changes nothing.
func TestTopicsCommands(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	env := map[string]string{"NEWSLETTER_REDIS_URL": redisURL, "NEWSLETTER_SECRET": "topics-test-secret-01"}
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
		return code, out.String(), errb.String()
	}
	ctx := context.Background()
	// What a service of the release before recorded at its start.
	if err := rdb.Set(ctx, "nl:topics", `[{"ID":"digest","Name":"Weekly digest","Default":true},{"ID":"updates","Name":"Updates"},{"ID":"essays","Name":"Long essays"}]`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cmd("topics", "show")
	if code != 0 || !strings.Contains(out, `"version": 0`) || !strings.Contains(out, `"id": "essays"`) {
		t.Fatalf("show on a Redis without a catalog: exit %d\n%s%s", code, out, errs)
	}
	if c, err := store.NewRedis(rdb).Catalog(ctx); err != nil || c.Version != 0 {
		t.Fatalf("a command stored the catalog: version %d, %v", c.Version, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "topics.yaml")
	if err := os.WriteFile(file, []byte("topics:\n  - {id: digest, name: Weekly digest, default: true}\n  - {id: updates, name: Updates}\n  - {id: essays, name: Long essays}\n"+
		"sequence:\n  topic: digest\n  steps:\n    - {template: welcome, after: 1m}\n    - {template: getting-started, after: 72h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cmd("topics", "import", file); code != 0 || !strings.Contains(out, "version 1") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = cmd("topics", "show")
	if code != 0 || !strings.Contains(out, `"version": 1`) || !strings.Contains(out, `"template": "getting-started"`) {
		t.Fatalf("show after the import: exit %d\n%s", code, out)
	}
	fewer := filepath.Join(dir, "fewer.yaml")
	if err := os.WriteFile(fewer, []byte("topics:\n  - {id: digest, name: Weekly digest, default: true}\n  - {id: updates, name: Updates}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cmd("topics", "import", fewer); code == 0 || !strings.Contains(errs, "retire") {
		t.Fatalf("a file without a stored topic: exit %d\n%s", code, errs)
	}
	if c, err := store.NewRedis(rdb).Catalog(ctx); err != nil || c.Version != 1 {
		t.Fatalf("after a refused import: version %d, %v", c.Version, err)
	}
}

// TestSequenceChangedAtRunTime: a running service takes a sequence edited
// through the API without a restart. A person in the middle of the
// sequence gets the new step scheduled (the worker realigns at the
// change), and a new reader gets the step written in Markdown, rendered
// with their name, over SMTP.
func TestSequenceChangedAtRunTime(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN":   issueAdmin,
		"NEWSLETTER_DOUBLE_OPTIN":  "false",
		"NEWSLETTER_WELCOME_DELAY": "1s",
	}), "serve")
	subscribe := func(email, name string) {
		resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {email}, "name": {name}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("subscribe %s: %d", email, resp.StatusCode)
		}
	}
	subscribe("early@example.com", "Early")
	poll.True(t, poll.BusyMachine, "the first reader's welcome", func() bool { return len(smtpSrv.Messages()) >= 1 })

	svc.callJSON(t, "PUT", "/api/sequence", `{"version":1,"topic":"digest","steps":[{"template":"welcome","after":"1s"},
		{"template":"tips","after":"1h","subject":"Tips for {{.Name}}","body":"Hello **{{.Name}}**, here are tips."}]}`, http.StatusOK, nil)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	seq := topics.Sequence{Topic: "digest", Steps: []topics.Step{{Template: "welcome"}, {Template: "tips"}}}
	ref := tasks.SequenceTasks("early@example.com", seq)[1]
	poll.True(t, poll.BusyMachine, "the reader in the middle gets the new step scheduled", func() bool {
		info, err := insp.GetTaskInfo(ref.Queue, ref.ID)
		return err == nil && info.State == asynq.TaskStateScheduled && info.NextProcessAt.After(time.Now().Add(50*time.Minute))
	})

	svc.callJSON(t, "PUT", "/api/sequence", `{"version":2,"topic":"digest","steps":[{"template":"welcome","after":"1s"},
		{"template":"tips","after":"3s","subject":"Tips for {{.Name}}","body":"Hello **{{.Name}}**, here are tips."}]}`, http.StatusOK, nil)
	subscribe("late@example.com", "Late")
	var tips smtptest.Message
	poll.True(t, poll.BusyMachine, "the new reader's step", func() bool {
		for _, m := range smtpSrv.To("late@example.com") {
			if m.Header.Get("Subject") == "Tips for Late" {
				tips = m
				return true
			}
		}
		return false
	})
	if html, text := tips.HTML(), tips.Text(); !strings.Contains(html, "<strong>Late</strong>") || !strings.Contains(text, "here are tips") {
		t.Fatalf("the step's mail is not its Markdown rendered for the reader:\n%s\n%s", html, text)
	}
	poll.True(t, poll.BusyMachine, "the new reader's welcome too", func() bool { return len(smtpSrv.To("late@example.com")) >= 2 })
	if n := len(smtpSrv.To("late@example.com")); n != 2 {
		t.Fatalf("the new reader got %d mails, want 2 (welcome, tips)", n)
	}
}
