package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	headless "github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

// TestLocalHoursAndLiveReportInChromium: an issue sent at a local hour
// shows, in a real browser, that it waits (scheduled, its first and last
// readers' hours, still reschedulable); when its first batch makes it
// sending the open page follows by itself, and its report refreshes
// itself while it sends (a delivery counted after the page opened shows
// up); once sent, the page stops being live.
func TestLocalHoursAndLiveReportInChromium(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var subs []store.Subscriber
	for i := range 2 {
		subs = append(subs, e.subscribe(t, fmt.Sprintf("r%d@example.com", i), "digest"))
	}
	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "At nine", Body: "text", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	// As the service and the planner leave it: scheduled at a local
	// hour, its readers' hours worked out.
	if is, err = e.st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueScheduled,
		store.IssueChange{Round: is.Round, NewRound: true, SetSchedule: true, LocalTime: "09:00"}); err != nil {
		t.Fatal(err)
	}
	first, last := time.Date(2099, 1, 15, 8, 0, 0, 0, time.UTC), time.Date(2099, 1, 16, 0, 0, 0, 0, time.UTC)
	if err := e.st.RecordLocalSpan(ctx, is.ID, is.Round, first, last); err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf("/admin/issues/%d", is.ID)
	bctx := headless.New(t, 1280, 1000)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(e.srv.URL+"/admin/login?next="+page),
		chromedp.SendKeys(chromedp.CSS("#token"), editorToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS(`[data-field="local-span"]`)),
	); err != nil {
		t.Fatal(err)
	}
	span, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`[data-field="local-span"]`)))
	if err != nil || !strings.Contains(span, "first readers at 2099-01-15 08:00 UTC, last at 2099-01-16 00:00 UTC") {
		t.Fatalf("the waiting line reads %q (%v)", span, err)
	}
	for _, sel := range []string{`[data-local-waiting]`, `form[action$="/reschedule"]`, `form[action$="/unschedule"]`} {
		if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('`+sel+`').length`)); err != nil || n != 1 {
			t.Fatalf("a local-hour send waiting lacks %s (%d, %v)", sel, n, err)
		}
	}
	headless.Shot(t, bctx, "console-issue-local-hours-waiting")

	// The first hour's batch: sending. The open page follows.
	if _, err := e.st.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueSending, store.IssueChange{Round: is.Round}); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector('`+sel+`') || {}).textContent || ""`))
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(got)
	}
	poll.Until(t, 30*time.Second, func() error {
		if got := text(`[data-report="live"] [data-field="delivered"]`); got != "0" {
			return fmt.Errorf("the live report's delivered reads %q, want 0", got)
		}
		return nil
	})
	// Deliveries counted after the page was made reach its report.
	for _, s := range subs {
		if err := e.st.MarkSent(ctx, store.Mark{Kind: store.IssueMarkKind, Key: fmt.Sprint(is.ID), SubscriberID: s.ID, Shared: true}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 40*time.Second, func() error {
		if got := text(`[data-report="live"] [data-field="delivered"]`); got != "2" {
			return fmt.Errorf("the live report's delivered reads %q, want 2", got)
		}
		return nil
	})
	headless.Shot(t, bctx, "console-issue-live-report")

	// Sent: the page reloads once and is live no more.
	if _, err := e.st.TransitionIssue(ctx, is.ID, []string{store.IssueSending}, store.IssueSent, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if got := text(`h1 .badge`); got != "sent" {
			return fmt.Errorf("the badge reads %q, want sent", got)
		}
		if live := text(`[data-report="live"]`); live != "" {
			return fmt.Errorf("a sent issue's report is still live")
		}
		return nil
	})
}
