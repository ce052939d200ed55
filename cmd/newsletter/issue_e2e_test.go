package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

const issueAdmin = "issue-e2e-admin-token-0123456789"

// call sends body (JSON, or nothing when "") to the service with the
// admin token and returns the status and the answer.
func (s *service) call(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+issueAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// callJSON is call wanting status want, its answer decoded into v (nil:
// ignored).
func (s *service) callJSON(t *testing.T, method, path, body string, want int, v any) {
	t.Helper()
	code, b := s.call(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// createIssue writes an issue through the API and returns its id.
func (s *service) createIssue(t *testing.T, subject, preheader, body string, topicIDs ...string) int64 {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"subject": subject, "preheader": preheader, "body": body, "topics": topicIDs})
	var out struct {
		ID     int64
		Status string
	}
	s.callJSON(t, "POST", "/api/issues", string(in), http.StatusCreated, &out)
	if out.ID <= 0 || out.Status != store.IssueDraft {
		t.Fatalf("created issue %+v", out)
	}
	return out.ID
}

// issueProgress is the answer of GET /api/issues/{id}/progress.
type issueProgress struct {
	Status                         string
	Planned, Sent, Skipped, Failed int
}

func (s *service) progress(t *testing.T, id int64) issueProgress {
	t.Helper()
	var p issueProgress
	s.callJSON(t, "GET", fmt.Sprintf("/api/issues/%d/progress", id), "", http.StatusOK, &p)
	return p
}

// waitSent polls the progress route until the issue is sent.
func (s *service) waitSent(t *testing.T, id int64, smtpSrv *smtptest.Server) issueProgress {
	t.Helper()
	var p issueProgress
	poll.Until(t, poll.BusyMachine, func() error {
		if p = s.progress(t, id); p.Status == store.IssueSent {
			return nil
		}
		return fmt.Errorf("issue %d: %+v; the SMTP server has %d mails", id, p, len(smtpSrv.Messages()))
	})
	return p
}

// threeTopicsFile is a topics file of three topics, all public.
func threeTopicsFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "topics.yaml")
	body := `topics:
  - {id: digest, name: Weekly digest, default: true}
  - {id: updates, name: Product updates, default: true}
  - {id: essays, name: Long essays}
`
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// seedReaders adds n active readers <prefix>NNN@example.org of topicIDs.
func seedReaders(t *testing.T, st *store.Redis, prefix string, n int, topicIDs ...string) []string {
	t.Helper()
	reqs := make([]store.SubscribeRequest, n)
	emails := make([]string, n)
	for i := range reqs {
		emails[i] = fmt.Sprintf("%s%03d@example.org", prefix, i)
		reqs[i] = store.SubscribeRequest{Email: emails[i], Activate: true, OnlyNew: true, Topics: topicIDs}
	}
	if _, err := st.SubscribeMany(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	return emails
}

// mailsTo counts the mails each address got, reading the server's
// messages once.
func mailsTo(srv *smtptest.Server) map[string]int {
	got := map[string]int{}
	for _, m := range srv.Messages() {
		for _, to := range m.To {
			got[strings.ToLower(to)]++
		}
	}
	return got
}

// issueMarkdown has what a letter has: a heading, a list, a link, a
// quote, and raw HTML that must stay inert.
const issueMarkdown = "# Spring notes\n\nHello **readers**, here is what changed:\n\n" +
	"- the [release notes](https://example.com/notes)\n- a faster import\n- *three* new topics\n\n" +
	"> Write less, send better.\n\n<script>alert(1)</script>\n"

// TestIssueToOneTopicOfThreeOverSMTP: three topics, readers in one, two
// or all of them; an issue to one topic reaches exactly its readers, each
// once, and the progress route counts them.
func TestIssueToOneTopicOfThreeOverSMTP(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_TOPICS_FILE": threeTopicsFile(t),
		"NEWSLETTER_SEND_RATE": "100000", "NEWSLETTER_DIGEST_BATCH": "20",
	}), "serve")
	st := versionedStore(t, rdb)
	digestOnly := seedReaders(t, st, "d", 60, "digest")
	updatesOnly := seedReaders(t, st, "u", 50, "updates")
	essaysOnly := seedReaders(t, st, "e", 40, "essays")
	essaysAndDigest := seedReaders(t, st, "ed", 30, "essays", "digest")
	all := seedReaders(t, st, "a", 20, "digest", "updates", "essays")
	updatesAndDigest := seedReaders(t, st, "ud", 10, "updates", "digest")

	id := svc.createIssue(t, "Essays, spring", "", issueMarkdown, "essays")
	svc.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`, http.StatusAccepted, nil)
	p := svc.waitSent(t, id, smtpSrv)

	readers := slices.Concat(essaysOnly, essaysAndDigest, all)
	got := mailsTo(smtpSrv)
	for _, e := range readers {
		if got[e] != 1 {
			t.Errorf("%s, a reader of essays, got %d mails", e, got[e])
		}
	}
	for _, e := range slices.Concat(digestOnly, updatesOnly, updatesAndDigest) {
		if got[e] != 0 {
			t.Errorf("%s, no reader of essays, got %d mails", e, got[e])
		}
	}
	if n := len(smtpSrv.Messages()); n != len(readers) {
		t.Errorf("%d mails, want %d", n, len(readers))
	}
	if p.Planned != len(readers) || p.Sent != len(readers) || p.Skipped != 0 || p.Failed != 0 {
		t.Errorf("progress %+v, want %d planned and sent", p, len(readers))
	}
	// Each mail is the essays topic's: its List-Id, whichever other
	// topics the reader has.
	for _, m := range smtpSrv.To(all[0]) {
		if !strings.HasPrefix(m.Header.Get("List-Id"), "Long essays <essays.") {
			t.Errorf("List-Id %q, want the essays topic's", m.Header.Get("List-Id"))
		}
	}
	// A second send is refused and sends nothing.
	svc.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`, http.StatusConflict, nil)
	if n := len(smtpSrv.Messages()); n != len(readers) {
		t.Errorf("%d mails after a refused second send, want %d", n, len(readers))
	}
}

// personal are the parts of a mail that are the reader's own: the
// links with their token, and the address.
var personal = regexp.MustCompile(`token=[A-Za-z0-9_\-.%=]+`)

// comparable is a mail as a reader sees it, with what may differ between
// a preview and a sent mail (Date, Message-ID, the DKIM signatures, the
// personal tokens, the address) replaced by placeholders: its header
// fields in order, and the decoded text and HTML parts.
func comparable(t *testing.T, raw []byte, addr string) string {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a mail: %v\n%s", err, raw)
	}
	neutral := func(s string) string {
		s = personal.ReplaceAllString(s, "token=TOKEN")
		return strings.ReplaceAll(s, addr, "READER")
	}
	var b strings.Builder
	fields := headerOrder(raw)
	for _, name := range fields {
		values := m.Header[textproto(name)]
		for _, v := range values {
			switch textproto(name) {
			case "Date", "Message-Id", "Dkim-Signature":
				v = "VARIES"
			case "Content-Type":
				v = regexp.MustCompile(`boundary="?[^";]+"?`).ReplaceAllString(v, "boundary=B")
			}
			fmt.Fprintf(&b, "%s: %s\n", textproto(name), neutral(v))
		}
	}
	msg := smtptest.Message{Data: raw}
	fmt.Fprintf(&b, "\n--- text\n%s\n--- html\n%s\n", neutral(msg.Text()), neutral(msg.HTML()))
	return b.String()
}

// textproto is a header name in its canonical form (mail.Header's keys).
func textproto(name string) string {
	return http.CanonicalHeaderKey(name)
}

// headerOrder is the names of raw's header fields in the order they come,
// each once.
func headerOrder(raw []byte) []string {
	head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	var names []string
	for _, line := range strings.Split(string(head), "\r\n") {
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		name, _, ok := strings.Cut(line, ":")
		if ok && !slices.Contains(names, textproto(name)) {
			names = append(names, textproto(name))
		}
	}
	return names
}

// TestIssuePreviewIsTheSentMail: the preview route's .eml of an issue is
// the mail a reader of that topic receives over SMTP, header by header
// and part by part, apart from Date, Message-ID, the DKIM signature and
// the reader's own links and address. DKIM and VERP are on, as in
// production.
func TestIssuePreviewIsTheSentMail(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, _ := writeKey(t, key)
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_TOPICS_FILE": threeTopicsFile(t),
		"NEWSLETTER_FROM":        "News <news@news.example.com>",
		"NEWSLETTER_DKIM_DOMAIN": "example.com", "NEWSLETTER_DKIM_KEY_FILE": keyFile, "NEWSLETTER_DKIM_SELECTOR": "s1",
		"NEWSLETTER_BOUNCE_ADDRESS": "bounces@news.example.com",
		// The preview shows the links as written; with counting on, each
		// reader's mail carries their own counted links (and a hidden
		// honeypot), which no preview can show.
		"NEWSLETTER_ENGAGEMENT": "off",
	}), "serve")
	st := versionedStore(t, rdb)
	reader := seedReaders(t, st, "p", 1, "updates", "essays")[0]

	id := svc.createIssue(t, "Spring notes: what changed", "Three changes and a quote", issueMarkdown, "essays", "updates")
	code, preview := svc.call(t, "GET", fmt.Sprintf("/api/issues/%d/preview?topic=essays&format=eml", id), "")
	if code != http.StatusOK {
		t.Fatalf("preview: %d %s", code, preview)
	}
	svc.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`, http.StatusAccepted, nil)
	svc.waitSent(t, id, smtpSrv)
	sent := smtpSrv.To(reader)
	if len(sent) != 1 {
		t.Fatalf("%d mails to the reader, want 1", len(sent))
	}
	want, got := comparable(t, preview, "reader@example.com"), comparable(t, sent[0].Data, reader)
	if got != want {
		t.Fatalf("the sent mail differs from its preview:\n--- preview\n%s\n--- sent\n%s", want, got)
	}
	// The comparison has something to compare: the parts, the personal
	// headers, the signature.
	for _, s := range []string{"Dkim-Signature: VARIES", "List-Unsubscribe: <", "token=TOKEN", "<h1", "Spring notes", "https://example.com/notes"} {
		if !strings.Contains(got, s) {
			t.Errorf("the sent mail lacks %q:\n%s", s, got)
		}
	}
	if !strings.HasPrefix(sent[0].From, "bounces+") {
		t.Errorf("envelope sender %q: want a VERP return path", sent[0].From)
	}
}

// TestWorkerKilledMidIssue: a worker process sending an issue to 2,000
// readers is killed with SIGKILL; another worker takes over and every
// reader gets the issue, at most the killed worker's concurrency twice
// (mails it had sent and not yet marked). The issue goes through the API
// (an API process of its own), as a publisher sends it.
func TestWorkerKilledMidIssue(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for asynq to recover the killed worker's tasks (about a minute)")
	}
	const readers, concurrency = 2000, 4
	rdb, redisURL := longTestRedis(t)
	smtpSrv := smtptest.Start(t)
	smtpSrv.SetDelay(2 * time.Millisecond)
	emails := seedReaders(t, versionedStore(t, rdb), "k", readers, "updates")
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_CONCURRENCY": fmt.Sprint(concurrency), "NEWSLETTER_SEND_RATE": "100000",
		"NEWSLETTER_CLAIM_TTL": "30m", "NEWSLETTER_RETRY_BASE": "100ms", "NEWSLETTER_DIGEST_BATCH": "50",
	})
	api := startService(t, maps.Clone(env), "api")
	workerEnv := maps.Clone(env)
	workerEnv["NEWSLETTER_ADDR"] = freeAddr(t)
	first := startProcess(t, "worker", workerEnv)

	id := api.createIssue(t, "Sent through a crash", "", issueMarkdown, "updates")
	api.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`, http.StatusAccepted, nil)
	poll.True(t, poll.BusyMachine, "the first worker to send some of the issue", func() bool { return len(smtpSrv.Messages()) >= 300 })
	if err := first.Process.Kill(); err != nil { // SIGKILL: no shutdown, no cleanup
		t.Fatal(err)
	}
	_ = first.Wait() // killed: its error is the signal
	killedAt := len(smtpSrv.Messages())
	expireKilledLeases(t, rdb, first)

	workerEnv["NEWSLETTER_ADDR"] = freeAddr(t)
	startProcess(t, "worker", workerEnv)
	poll.True(t, poll.BusyMachine+recoverAfter, "every reader to get the issue", func() bool { return everyoneGotMail(smtpSrv, emails) })
	p := api.waitSent(t, id, smtpSrv)
	got := mailsTo(smtpSrv)
	dups := 0
	for _, e := range emails {
		dups += got[e] - 1
	}
	t.Logf("killed after %d mails; %d mails in all, %d twice; progress %+v", killedAt, len(smtpSrv.Messages()), dups, p)
	if dups > concurrency || len(smtpSrv.Messages()) != readers+dups {
		t.Fatalf("%d doubles (%d mails for %d readers), more than the killed worker's concurrency %d", dups, len(smtpSrv.Messages()), readers, concurrency)
	}
	if p.Planned != readers || p.Sent != readers || p.Failed != 0 || p.Skipped != 0 {
		t.Fatalf("progress %+v, want all %d planned and sent once each", p, readers)
	}
}

// TestIssuePausedAtHalfThenResumed, through the API: pause at about half
// of 2,000 readers, the sending stops (the queue drains and nothing more
// arrives), resume carries on; each reader gets it once, nobody skipped.
func TestIssuePausedAtHalfThenResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 2,000 mails")
	}
	const readers = 2000
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	emails := seedReaders(t, versionedStore(t, rdb), "h", readers, "digest")
	// Slow enough (400 mails/s) to pause midway on any machine.
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_SEND_RATE": "400", "NEWSLETTER_CONCURRENCY": "8",
		"NEWSLETTER_DIGEST_BATCH": "50",
	}), "serve")
	id := svc.createIssue(t, "A long letter", "", issueMarkdown, "digest")
	path := fmt.Sprintf("/api/issues/%d/", id)
	svc.callJSON(t, "POST", path+"send", `{}`, http.StatusAccepted, nil)
	poll.True(t, poll.BusyMachine, "half of the readers to get it", func() bool { return len(smtpSrv.Messages()) >= readers/2 })
	svc.callJSON(t, "POST", path+"pause", `{}`, http.StatusOK, nil)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	// Paused: every batch already queued runs and stops, and the
	// planner stops; then the count holds.
	poll.True(t, poll.BusyMachine, "the issue's tasks to leave the queues", func() bool {
		return noTasks(t, insp, tasks.QueueCritical, tasks.TypeIssuePlan, tasks.TypeIssueEmail)
	})
	atPause := len(smtpSrv.Messages())
	if p := svc.progress(t, id); p.Status != store.IssuePaused || atPause >= readers || p.Sent != atPause {
		t.Fatalf("paused: %+v, %d mails", p, atPause)
	}
	svc.callJSON(t, "POST", path+"send", `{}`, http.StatusConflict, nil)
	svc.callJSON(t, "POST", path+"resume", `{}`, http.StatusOK, nil)
	p := svc.waitSent(t, id, smtpSrv)
	got := mailsTo(smtpSrv)
	for _, e := range emails {
		if got[e] != 1 {
			t.Errorf("%s got %d mails, want 1", e, got[e])
		}
	}
	if len(smtpSrv.Messages()) != readers || p.Planned != readers || p.Sent != readers || p.Skipped != 0 || p.Failed != 0 {
		t.Fatalf("%d mails, progress %+v; want %d each once", len(smtpSrv.Messages()), p, readers)
	}
	t.Logf("paused after %d of %d", atPause, readers)
}
