package worker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/internal/engage"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The real mail path: an issue sent by its batch carries each link as
// the reader's own counted link (in the HTML and the text alike), a
// hidden honeypot and the pixel, and never the mark; the targets are
// stored; and the links of the mails, followed over HTTP, redirect to
// the written targets and count each reader once.
func TestIssueLinksCountedThroughTheRedirect(t *testing.T) {
	h, st, _ := newHandlers(t)
	ctx := context.Background()
	keys := engage.NewKeys([]byte("0123456789abcdef"))
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	h.Issues.Links.BaseURL, h.Issues.Links.Engagement, h.Issues.Links.Opens = base, keys, true
	sent := time.Now().Add(-time.Hour) // no click is a scanner's early one
	h.Issues.Now = func() time.Time { return sent }
	var ids []int64
	for _, a := range []string{"ann@example.org", "bob@example.org"} {
		sub, err := st.Subscribe(ctx, store.SubscribeRequest{Email: a, Activate: true, Topics: []string{topics.Digest}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	body := "Read [the post](https://example.com/post?a=1&b=2) and <https://example.com/other>; [again](https://example.com/post?a=1&b=2)."
	is, err := st.CreateIssue(ctx, store.IssueContent{Subject: "Letter", Body: body, Topics: []string{topics.Digest}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, err = st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	mail := &recorder{}
	h.Issues.Deliver.Mailer = mail
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, tasks.NewIssueBatch(is.ID, is.Round, ids, sent, false)); err != nil {
		t.Fatal(err)
	}
	if len(mail.sent) != 2 {
		t.Fatalf("%d mails, want 2", len(mail.sent))
	}
	urls, err := st.IssueLinks(ctx, is.ID)
	if err != nil || len(urls) != 2 || urls[0] != "https://example.com/post?a=1&b=2" || urls[1] != "https://example.com/other" {
		t.Fatalf("stored links: %q, %v", urls, err)
	}

	m := engage.NewMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := engage.NewRecorder(st, engage.RecorderConfig{FlushEvery: -1}, m, log)
	eh := &engage.Handler{Keys: keys, Links: st, Recorder: rec, Classify: &engage.Classifier{}, Mode: engage.Aggregate, Opens: true, Metrics: m, Log: log}
	mux := http.NewServeMux()
	eh.Register(mux)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)

	hrefs := regexp.MustCompile(`href="(` + regexp.QuoteMeta(base) + `/r/[^"]+)"`)
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, msg := range mail.sent {
		for _, part := range []string{msg.HTML, msg.Text} {
			if strings.Contains(part, mailer.ReaderMark) || strings.Contains(part, "https://example.com/post") {
				t.Fatalf("mail to %s carries the mark or a bare link:\n%s", msg.To, part)
			}
		}
		if !strings.Contains(msg.HTML, base+"/o/") || !strings.Contains(msg.HTML, `style="display:none`) {
			t.Fatalf("mail to %s lacks the pixel or the honeypot:\n%s", msg.To, msg.HTML)
		}
		found := hrefs.FindAllStringSubmatch(msg.HTML, -1)
		if len(found) != 4 { // three links of the body, the honeypot
			t.Fatalf("mail to %s: %d counted links, want 4:\n%s", msg.To, len(found), msg.HTML)
		}
		if !strings.Contains(msg.Text, found[0][1]) {
			t.Fatalf("the text part lacks the HTML's first link %s:\n%s", found[0][1], msg.Text)
		}
		// Each reader follows the first link twice and the second once.
		// (The body's third link is its first target again.)
		for i, want := range map[int]string{0: urls[0], 2: urls[0], 1: urls[1]} {
			link := found[i][1]
			req, _ := http.NewRequest("GET", strings.ReplaceAll(link, "&amp;", "&"), nil)
			req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0")
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
				t.Fatalf("%s: %d to %q, want %q", link, resp.StatusCode, resp.Header.Get("Location"), want)
			}
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := st.IssueEngagement(ctx, is.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Clicks != 6 || e.UniqueClickers != 2 || e.Links[0].Clicks != 4 || e.Links[0].UniqueClickers != 2 || e.Links[1].Clicks != 2 || e.MachineClicks != 0 {
		t.Fatalf("engagement: %+v", e)
	}
}
