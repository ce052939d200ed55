package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// TestIssueReportEndToEnd sends an issue through the whole service (the
// API, the worker, a real SMTP server, the bounce intake) and reads its
// report: every mail delivered counts, a bounce reported by the receiving
// MTA counts as bounced, a reader who leaves with the issue's own
// List-Unsubscribe one-click counts as unsubscribed because of it (once,
// however often the client posts), and a reader who leaves with the
// welcome mail's one-click does not. The form signup counts in the
// topic's growth by source.
func TestIssueReportEndToEnd(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	intakeAddr := freeAddr(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_BOUNCE_ADDRESS":   "bounces@b.example.com",
		"NEWSLETTER_BOUNCE_SMTP_ADDR": intakeAddr,
		"NEWSLETTER_ADMIN_TOKEN":      bounceAdminToken,
		"NEWSLETTER_WELCOME_DELAY":    "1s",
	}), "serve")
	st := versionedStore(t, rdb)
	ctx := context.Background()
	admin := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, svc.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bounceAdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	oneClick := func(link string) {
		t.Helper()
		resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("one-click %s: %d", link, resp.StatusCode)
		}
	}

	readers := []string{"stay@example.org", "gone@example.org", "leave@example.org"}
	for _, e := range readers {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true, OnlyNew: true, Topics: []string{"digest"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A reader who came through the form: the confirmation, then the
	// welcome, whose one-click is not the issue's.
	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"form@example.org"}})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()
	confirm := smtpSrv.WaitFor(t, 1, poll.BusyMachine)[0]
	tok := ""
	for _, l := range linkPattern.FindAllString(confirm.Text(), -1) {
		if u, err := url.Parse(strings.TrimRight(l, ".\"'>")); err == nil && u.Path == "/confirm" {
			tok = u.Query().Get("token")
		}
	}
	if resp, err := http.PostForm(svc.base+"/confirm", url.Values{"token": {tok}}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("confirm: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	poll.True(t, poll.BusyMachine, "the welcome", func() bool { return len(smtpSrv.To("form@example.org")) == 2 })
	welcome := smtpSrv.To("form@example.org")[1]
	welcomeUnsub := strings.Trim(welcome.Header.Get("List-Unsubscribe"), "<>")

	code, out := admin("POST", "/api/issues", `{"subject":"December","body":"Read [this](https://example.com/a).","topics":["digest"]}`)
	var is store.Issue
	if err := json.Unmarshal([]byte(out), &is); code != http.StatusCreated || err != nil {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, out := admin("POST", fmt.Sprintf("/api/issues/%d/send", is.ID), `{}`); code != http.StatusAccepted {
		t.Fatalf("send: %d %s", code, out)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		p, err := st.IssueProgress(ctx, is.ID)
		if err != nil || p.Status != store.IssueSent {
			return fmt.Errorf("issue %d: %+v %v", is.ID, p, err)
		}
		return nil
	})
	issueMail := map[string]smtptest.Message{}
	for _, e := range append(readers, "form@example.org") {
		got := smtpSrv.To(e)
		if len(got) == 0 {
			t.Fatalf("%s got no mail", e)
		}
		issueMail[e] = got[len(got)-1]
		if !strings.Contains(issueMail[e].Header.Get("Subject"), "December") {
			t.Fatalf("%s's last mail is %q", e, issueMail[e].Header.Get("Subject"))
		}
	}

	// The receiving MTA's bounce, to the tagged return path.
	gone := issueMail["gone@example.org"]
	deliverReport(t, intakeAddr, gone.From, postfixDSN(t, "gone@example.org", feedback.TagOfAddress(gone.From)))
	// The issue's one-click, posted twice; the welcome's one-click.
	leave := strings.Trim(issueMail["leave@example.org"].Header.Get("List-Unsubscribe"), "<>")
	oneClick(leave)
	oneClick(leave)
	oneClick(welcomeUnsub)

	var rep issues.Report
	poll.Until(t, poll.BusyMachine, func() error {
		code, out := admin("GET", fmt.Sprintf("/api/issues/%d/report", is.ID), "")
		if err := json.Unmarshal([]byte(out), &rep); code != 200 || err != nil {
			return fmt.Errorf("report: %d %s", code, out)
		}
		if rep.Bounced != 1 {
			return fmt.Errorf("the bounce is not counted yet: %s", out)
		}
		return nil
	})
	want := issues.Report{Issue: is.ID, Subject: "December", Status: store.IssueSent, SentAt: rep.SentAt,
		Planned: 4, Delivered: 4, Bounced: 1, Unsubscribed: 1, Links: rep.Links, Hours: rep.Hours}
	if fmt.Sprint(rep) != fmt.Sprint(want) {
		t.Fatalf("report:\n%+v\nwant\n%+v", rep, want)
	}
	for email, status := range map[string]store.Status{"leave@example.org": store.Unsubscribed, "gone@example.org": store.Bounced, "stay@example.org": store.Active} {
		if sub, err := st.Get(ctx, email); err != nil || sub.Status != status {
			t.Errorf("%s: %s %v, want %s", email, sub.Status, err, status)
		}
	}
	// The welcome's one-click left its topic (the issue's too): had it
	// been taken for the issue's, unsubscribed would be 2.
	if sub, err := st.Get(ctx, "form@example.org"); err != nil || slices.Contains(sub.Topics, "digest") {
		t.Errorf("the welcome's one-click did not leave digest: %+v %v", sub, err)
	}

	// The CSV: its header and the totals row last.
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/issues/%d/report?format=csv", svc.base, is.ID), nil)
	req.Header.Set("Authorization", "Bearer "+bounceAdminToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") || len(rows) < 2 ||
		strings.Join(rows[0], ",") != strings.Join(issues.ReportCSVHeader, ",") || rows[len(rows)-1][0] != "total" {
		t.Fatalf("csv: %s %q %v", resp.Header.Get("Content-Type"), rows, err)
	}

	// The form's reader counts in the digest topic's growth as form; the
	// readers stored without a source as other.
	code, out = admin("GET", "/api/topics/digest/growth?days=2", "")
	var g store.TopicGrowth
	if err := json.Unmarshal([]byte(out), &g); code != 200 || err != nil || g.Total.Form != 1 || g.Total.Other != 3 || g.Total.Import != 0 {
		t.Fatalf("growth: %d %s", code, out)
	}
}
