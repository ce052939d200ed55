package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/engage"
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
	// A link whose text is its address (<https://…>) is left as written
	// (engage.Rewrite): the worded ones are counted.
	body := "Read [the post](https://example.com/post?a=1&b=2) and [the other](https://example.com/other); [again](https://example.com/post?a=1&b=2). " +
		"See <https://example.com/bare>."
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
		if !strings.Contains(msg.HTML, `<a href="https://example.com/bare">https://example.com/bare</a>`) {
			t.Fatalf("mail to %s: the link that shows its address was rewritten:\n%s", msg.To, msg.HTML)
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

// A topic event's mail carries its link as the reader's own counted link
// (HTML and text alike, never the bare target nor the mark), signed and
// counted under the event's engagement id, which a retried fan-out keeps;
// followed over HTTP it redirects to the event's URL and is counted once
// per reader; a tampered token is refused (404, no redirect).
func TestEventLinkCountedThroughTheRedirect(t *testing.T) {
	h, st, mail := newHandlers(t)
	ctx := context.Background()
	keys := engage.NewKeys([]byte("0123456789abcdef"))
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	h.Fanout.Links.BaseURL, h.Fanout.Links.Engagement = base, keys
	sent := time.Now().Add(-time.Hour) // no click is a scanner's early one
	h.Fanout.Now = func() time.Time { return sent }
	for _, a := range []string{"ann@example.org", "bob@example.org"} {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: a, Activate: true, Topics: []string{topics.Updates}}); err != nil {
			t.Fatal(err)
		}
	}
	target := "https://example.com/launch?a=1&b=2"
	p := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "We launched", URL: target, At: sent}
	batches := eventBatches(ctx, t, h.Fanout, p)
	eng, err := st.EventEngagement(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || batches[0].Engagement != eng || eng <= 0 {
		t.Fatalf("batches %+v, want one under the event's engagement id %d", batches, eng)
	}
	if urls, err := st.IssueLinks(ctx, eng); err != nil || len(urls) != 1 || urls[0] != target {
		t.Fatalf("the event's stored link: %q, %v", urls, err)
	}
	// A retried fan-out asks again and signs under the same id.
	if again, err := st.EventEngagement(ctx, p.ID); err != nil || again != eng {
		t.Fatalf("the event's engagement id asked again: %d, %v; want %d", again, err, eng)
	}
	for _, b := range batches {
		if err := runTask(ctx, tasks.EventMail, h.Fanout.HandleEventMail, tasks.NewEventMail(b, sent, false)); err != nil {
			t.Fatal(err)
		}
	}
	if mail.count() != 2 {
		t.Fatalf("%d mails, want 2", mail.count())
	}

	m := engage.NewMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := engage.NewRecorder(st, engage.RecorderConfig{FlushEvery: -1}, m, log)
	eh := &engage.Handler{Keys: keys, Links: st, Recorder: rec, Classify: &engage.Classifier{}, Mode: engage.Aggregate, Metrics: m, Log: log}
	mux := http.NewServeMux()
	eh.Register(mux)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)

	hrefs := regexp.MustCompile(`href="(` + regexp.QuoteMeta(base) + `/r/[^"]+)"`)
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(link string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", link, nil)
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	var tokens []string
	for _, msg := range mail.sent {
		for _, part := range []string{msg.HTML, msg.Text} {
			if strings.Contains(part, mailer.ReaderMark) || strings.Contains(part, "https://example.com/launch") {
				t.Fatalf("mail to %s carries the mark or the bare link:\n%s", msg.To, part)
			}
		}
		found := hrefs.FindAllStringSubmatch(msg.HTML, -1)
		if len(found) != 1 {
			t.Fatalf("mail to %s: %d counted links, want 1:\n%s", msg.To, len(found), msg.HTML)
		}
		link := found[0][1]
		if !strings.Contains(msg.Text, link) {
			t.Fatalf("the text part lacks the HTML's link %s:\n%s", link, msg.Text)
		}
		tok := strings.TrimPrefix(link, base+"/r/")
		if c, err := keys.Parse(tok); err != nil || c.Issue != eng || c.Index != 0 {
			t.Fatalf("the link's token names %+v (%v); want link 0 of engagement id %d", c, err, eng)
		}
		tokens = append(tokens, tok)
		// Twice: the reader counts once.
		for range 2 {
			if resp := get(link); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target {
				t.Fatalf("%s: %d to %q, want 302 to %q", link, resp.StatusCode, resp.Header.Get("Location"), target)
			}
		}
	}
	if tokens[0] == tokens[1] {
		t.Fatalf("two readers share the token %s", tokens[0])
	}
	// One character changed in the link's part or in the reader's, and a
	// token signed with another secret: none is ours.
	flip := func(tok string, i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	other := engage.NewKeys([]byte("another secret of sixteen"))
	tampered := []string{
		flip(tokens[0], 3),
		flip(tokens[0], len(tokens[0])-3),
		engage.Token(other.LinkPart(engage.Link, eng, 0), other.ReaderPart(eng, 1, sent)),
	}
	for _, tok := range tampered {
		if resp := get(base + "/r/" + tok); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
			t.Fatalf("tampered %s: %d to %q, want 404 without a redirect", tok, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := st.IssueEngagement(ctx, eng)
	if err != nil {
		t.Fatal(err)
	}
	if e.Clicks != 4 || e.UniqueClickers != 2 || len(e.Links) != 1 || e.Links[0].URL != target || e.Links[0].UniqueClickers != 2 || e.MachineClicks != 0 {
		t.Fatalf("the event's engagement: %+v", e)
	}
}

// TestPersonEventLinksCounted: a bundle of one person's events carries
// each event's link through the counted redirect, each under its own
// event's engagement id and signed for the reader; the service's own
// links are left as written.
func TestPersonEventLinksCounted(t *testing.T) {
	h, st, mail := newHandlers(t)
	ctx := context.Background()
	keys := engage.NewKeys([]byte("0123456789abcdef"))
	base := "https://news.example.com"
	h.Events.Links.BaseURL, h.Events.Links.Engagement = base, keys
	sub, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "ann@example.org", Activate: true, Topics: []string{topics.Updates}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	events := []tasks.EventPayload{
		{ID: tasks.NewEventID(), SubscriberID: sub.ID, Title: "Your export is ready", URL: "https://example.com/exports/1", At: now},
		{ID: tasks.NewEventID(), SubscriberID: sub.ID, Title: "A comment", URL: "https://example.com/comments/2", At: now.Add(time.Second)},
		{ID: tasks.NewEventID(), SubscriberID: sub.ID, Title: "Our own page", URL: base + "/archive", At: now.Add(2 * time.Second)},
	}
	if err := runTask(ctx, tasks.EventsEmail, h.Events.HandleEventsEmail, tasks.NewEventsEmail(tasks.EventsPayload{SubscriberID: sub.ID, Events: events})); err != nil {
		t.Fatal(err)
	}
	if mail.count() != 1 {
		t.Fatalf("%d mails, want 1", mail.count())
	}
	msg := mail.sent[0]
	hrefs := regexp.MustCompile(`href="`+regexp.QuoteMeta(base)+`/r/([^"]+)"`).FindAllStringSubmatch(msg.HTML, -1)
	if len(hrefs) != 2 || strings.Contains(msg.HTML, "https://example.com/") || strings.Contains(msg.HTML, mailer.ReaderMark) ||
		!strings.Contains(msg.HTML, `href="`+base+`/archive"`) {
		t.Fatalf("want the two outside links counted and the own page as written:\n%s", msg.HTML)
	}
	for i, m := range hrefs {
		c, err := keys.Parse(m[1])
		if err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
		eng, err := st.EventEngagement(ctx, events[i].ID)
		if err != nil || c.Issue != eng || c.Index != 0 || c.Reader != sub.ID {
			t.Fatalf("link %d names %+v; want link 0 of the event's engagement id %d (%v) for reader %d", i, c, eng, err, sub.ID)
		}
		if urls, err := st.IssueLinks(ctx, eng); err != nil || len(urls) != 1 || urls[0] != events[i].URL {
			t.Fatalf("event %d's stored link: %q, %v", i, urls, err)
		}
		if !strings.Contains(msg.Text, base+"/r/"+m[1]) {
			t.Fatalf("the text part lacks link %d:\n%s", i, msg.Text)
		}
	}
}

// With NEWSLETTER_ENGAGEMENT=off (no keys) an event's mail carries its
// link as written, and nothing is given an engagement id.
func TestEventLinkAsWrittenWithEngagementOff(t *testing.T) {
	h, st, mail := newHandlers(t)
	ctx := context.Background()
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "ann@example.org", Activate: true, Topics: []string{topics.Updates}}); err != nil {
		t.Fatal(err)
	}
	target := "https://example.com/launch"
	p := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "We launched", URL: target, At: time.Now()}
	batches := eventBatches(ctx, t, h.Fanout, p)
	if len(batches) != 1 || batches[0].Engagement != 0 {
		t.Fatalf("batches %+v, want one without an engagement id", batches)
	}
	for _, b := range batches {
		if err := runTask(ctx, tasks.EventMail, h.Fanout.HandleEventMail, tasks.NewEventMail(b, time.Now(), false)); err != nil {
			t.Fatal(err)
		}
	}
	if mail.count() != 1 || !strings.Contains(mail.sent[0].HTML, `href="`+target+`"`) || strings.Contains(mail.sent[0].HTML, "/r/") ||
		!strings.Contains(mail.sent[0].Text, target) {
		t.Fatalf("%d mails; the first:\n%s", mail.count(), mail.sent[0].HTML)
	}
	// The next id the store gives is the first: the event took none.
	is, err := st.CreateIssue(ctx, store.IssueContent{Subject: "S", Body: "b"}, "")
	if err != nil || is.ID != 1 {
		t.Fatalf("the first issue after the event: %d, %v; want id 1", is.ID, err)
	}
}

// eventBatches runs the fan-out of p and answers the e-mail batches it
// queued.
func eventBatches(ctx context.Context, t *testing.T, f *FanoutSender, p tasks.FanoutPayload) []tasks.EventMailPayload {
	t.Helper()
	q := &recordQueue{}
	f.Queue = q
	if err := runTask(ctx, tasks.Fanout, f.HandleFanout, tasks.NewFanout(p)); err != nil {
		t.Fatal(err)
	}
	var out []tasks.EventMailPayload
	for _, task := range q.tasks {
		if task.Type() != tasks.TypeEventMail {
			continue
		}
		var b tasks.EventMailPayload
		if err := json.Unmarshal(task.Payload(), &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
