package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/inbox"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const inboxSecret = "inbox-test-secret-0123456789"

// inboxReader is one reader's signed calls to the inbox.
type inboxReader struct {
	svc   *service
	email string
	hash  string
}

func newInboxReader(t *testing.T, svc *service, email string) inboxReader {
	t.Helper()
	hash, err := inbox.Hash([]byte(inboxSecret), email)
	if err != nil {
		t.Fatal(err)
	}
	return inboxReader{svc: svc, email: email, hash: hash}
}

func (r inboxReader) query() string {
	return url.Values{"subscriber": {r.email}, "hash": {r.hash}}.Encode()
}

// stream opens the reader's event stream (from last, if given) and
// answers its events, "<event> <data>" with their ids, until it ends.
func (r inboxReader) stream(t *testing.T, last string) (events <-chan [3]string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", r.svc.base+"/inbox/stream?"+r.query(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	out := make(chan [3]string, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		var ev [3]string // id, event, data
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			line := sc.Text()
			if line == "" && ev[1] != "" {
				out <- ev
				ev = [3]string{}
			}
			for i, p := range []string{"id: ", "event: ", "data: "} {
				if v, ok := strings.CutPrefix(line, p); ok {
					ev[i] = v
				}
			}
		}
	}()
	return out, cancel
}

// until reads events until one of kind whose data has has.
func until(t *testing.T, events <-chan [3]string, kind, has string) [3]string {
	t.Helper()
	var seen []string
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended waiting for %s with %q; saw %v", kind, has, seen)
			}
			if ev[1] == kind && strings.Contains(ev[2], has) {
				return ev
			}
			seen = append(seen, ev[1]+" "+ev[2])
		case <-time.After(poll.BusyMachine):
			t.Fatalf("no %s with %q; saw %v", kind, has, seen)
		}
	}
}

// TestInboxEndToEnd: the inbox added through the seam, in the binary: an
// event reaches an open stream and the list, a read moves the count, a
// stranger's signature is refused, a reconnect with Last-Event-ID gets
// what it missed (on another API replica, which then gets the changes
// made through the first), and an event's e-mail held by "email_if_unread_after"
// goes, once, only to the reader who did not read it in the inbox.
func TestInboxEndToEnd(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_WELCOME_DELAY": "1h",
		"NEWSLETTER_INBOX_SECRET": inboxSecret, "NEWSLETTER_GROUP_GRACE": "1s", "NEWSLETTER_GROUP_MAX_DELAY": "2s",
	})
	svc := startServiceProcess(t, "serve", env)
	ctx := context.Background()
	st := store.NewRedis(rdb)
	for _, email := range []string{"reads@example.com", "ignores@example.com"} {
		svc.post(t, "/subscribe", `{"email":"`+email+`","topics":["updates"]}`, "", http.StatusAccepted)
		poll.Until(t, poll.BusyMachine, func() error { _, err := st.Get(ctx, email); return err })
	}
	reads, ignores := newInboxReader(t, svc, "reads@example.com"), newInboxReader(t, svc, "ignores@example.com")

	// The preference centre offers the inbox per topic beside e-mail.
	sub, err := st.Get(ctx, reads.email)
	if err != nil {
		t.Fatal(err)
	}
	tok := token.NewSigner([]byte("integration-test-secret"), 0).Sign(token.Preferences, sub.ID)
	resp, err := http.Get(svc.base + "/preferences?token=" + url.QueryEscape(tok))
	if err != nil {
		t.Fatal(err)
	}
	prefs, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(prefs), "In the app") || !strings.Contains(string(prefs), `value="updates:inbox"`) {
		t.Errorf("the preference centre does not offer the inbox (%d): %v", resp.StatusCode, err)
	}

	stranger := url.Values{"subscriber": {reads.email}, "hash": {ignores.hash}}.Encode()
	if code, body := svc.call(t, "GET", "/inbox/messages?"+stranger, ""); code != http.StatusForbidden || strings.Contains(string(body), "messages") {
		t.Fatalf("another reader's signature: %d %s, want 403", code, body)
	}

	events, stop := reads.stream(t, "")
	until(t, events, "count", `{"unread":0}`)
	svc.post(t, "/api/events", `{"topic":"updates","title":"Deploy finished","url":"https://example.com/d","body":"**v2** is live","email_if_unread_after":"10s"}`, issueAdmin, http.StatusAccepted)
	msg := until(t, events, "message", "Deploy finished")
	var m inbox.Message
	if err := json.Unmarshal([]byte(msg[2]), &m); err != nil || !strings.Contains(m.Body, "<strong>v2</strong>") {
		t.Errorf("the message's body: %s (%v)", msg[2], err)
	}
	until(t, events, "count", `{"unread":1}`)

	var list struct {
		Messages []inbox.Message `json:"messages"`
		Unread   int             `json:"unread"`
	}
	for _, r := range []inboxReader{reads, ignores} {
		poll.Until(t, poll.BusyMachine, func() error {
			svc.callJSON(t, "GET", "/inbox/messages?"+r.query(), "", http.StatusOK, &list)
			if len(list.Messages) != 1 || list.Unread != 1 || list.Messages[0].Title != "Deploy finished" {
				return fmt.Errorf("%s's list: %+v", r.email, list)
			}
			return nil
		})
	}
	svc.callJSON(t, "POST", "/inbox/messages/"+list.Messages[0].ID+"/read?"+reads.query(), "", http.StatusOK, nil)
	last := until(t, events, "count", `{"unread":0}`)[0]
	var count struct{ Unread int }
	if svc.callJSON(t, "GET", "/inbox/count?"+reads.query(), "", http.StatusOK, &count); count.Unread != 0 {
		t.Errorf("the count after the read: %d", count.Unread)
	}
	stop()

	// Missed while the page was closed, then resumed from its last id.
	svc.post(t, "/api/events", `{"email":"reads@example.com","title":"While you were away","url":"https://example.com/w","channels":["inbox"]}`, issueAdmin, http.StatusAccepted)
	poll.Until(t, poll.BusyMachine, func() error {
		svc.callJSON(t, "GET", "/inbox/count?"+reads.query(), "", http.StatusOK, &count)
		if count.Unread != 1 {
			return fmt.Errorf("unread %d", count.Unread)
		}
		return nil
	})
	// On another API replica: any replica serves any reader, from the
	// id the last one gave.
	replica := startServiceProcess(t, "api", env)
	events, stop = newInboxReader(t, replica, reads.email).stream(t, last)
	defer stop()
	until(t, events, "message", "While you were away")
	// A change made through the first replica reaches the stream on the
	// second (pub/sub).
	svc.post(t, "/api/events", `{"email":"reads@example.com","title":"Live on the replica","url":"https://example.com/l","channels":["inbox"]}`, issueAdmin, http.StatusAccepted)
	until(t, events, "message", "Live on the replica")

	// The held e-mail: the reader who did not read it gets it, once; the
	// one who read it does not.
	poll.True(t, poll.BusyMachine, "the unread reader's mail", func() bool {
		for _, m := range smtpSrv.To(ignores.email) {
			if strings.Contains(string(m.Data), "Deploy finished") {
				return true
			}
		}
		return false
	})
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.Until(t, poll.BusyMachine, func() error {
		done, err := insp.ListCompletedTasks(tasks.QueueDefault)
		if err != nil {
			return err
		}
		checks := 0
		for _, ti := range done {
			if ti.Type == tasks.TypeIfUnread {
				checks++
			}
		}
		if checks != 2 {
			return fmt.Errorf("%d of 2 unread checks done", checks)
		}
		return nil
	})
	// The console's page of the person shows their inbox.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := &http.Client{Jar: jar}
	resp, err = admin.PostForm(svc.base+"/admin/login", url.Values{"token": {issueAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sub, err = st.Get(ctx, ignores.email)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = admin.Get(fmt.Sprintf("%s/admin/subscribers/%d", svc.base, sub.ID))
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-channel="inbox"`) || !strings.Contains(string(page), "Deploy finished") {
		t.Errorf("the console's page of the person: %d, inbox shown %v", resp.StatusCode, strings.Contains(string(page), `data-channel="inbox"`))
	}
	// And the overview has the inbox lane's numbers (a 503 is Redis
	// slow on a busy machine: asked again).
	poll.Until(t, poll.BusyMachine, func() error {
		resp, err := admin.Get(svc.base + "/admin/")
		if err != nil {
			return err
		}
		overview, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(overview), "<tr><td>inbox") {
			return fmt.Errorf("the console's overview has no row of the inbox queue (%d, %v)", resp.StatusCode, err)
		}
		return nil
	})
	for email, want := range map[string]int{reads.email: 0, ignores.email: 1} {
		n := 0
		for _, m := range smtpSrv.To(email) {
			if strings.Contains(string(m.Data), "Deploy finished") {
				n++
			}
		}
		if n != want {
			t.Errorf("%s got %d mails of the event, want %d", email, n, want)
		}
	}
}
