package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	headless "github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

// TestSegmentsInChromium: an editor opens the Segments screen in a real
// browser, types an expression and sees the audience counted as they
// type (the count changes as the expression narrows, a mistake shows the
// parser's message), saves it, and picks it as the audience in the
// issue editor; the issue is stored with the segment and its send step
// counts the segment's people.
func TestSegmentsInChromium(t *testing.T) {
	e := newEnv(t)
	subs := seedSegmentPeople(t, e)
	active, _ := bruteCount(subs)
	var updates int64 // the active readers of updates: the first count
	for _, s := range subs {
		if s.Status == store.Active && strings.Contains(strings.Join(s.Topics, ","), "updates") {
			updates++
		}
	}
	if updates == active {
		t.Fatalf("both expressions count %d: the change would not show", active)
	}
	ctx := headless.New(t, 1280, 1000)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/admin/login?next=/admin/segments"),
		chromedp.SendKeys(chromedp.CSS("#token"), editorToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#segment-form")),
	); err != nil {
		t.Fatal(err)
	}
	// Where the script runs, the count follows the typing: no button.
	if shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("button[data-count-button]")).display`)); err != nil || shown != "none" {
		t.Fatalf("the Count button is shown beside the live count (display %q, %v)", shown, err)
	}
	countIs := func(want string) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#segment-count")))
			if err != nil || !strings.Contains(got, want) {
				return fmt.Errorf("the count reads %q (%v), want %q", got, err, want)
			}
			return nil
		})
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#seg-name"), "Beta, unpaid"),
		chromedp.SendKeys(chromedp.CSS("#seg-expr"), "topic:updates"),
	); err != nil {
		t.Fatal(err)
	}
	countIs(strconv.FormatInt(updates, 10) + " active")
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#seg-expr"), " AND (tag:beta")); err != nil {
		t.Fatal(err)
	}
	countIs("segment: at position")
	headless.Shot(t, ctx, "console-segment-error")
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#seg-expr"), " AND NOT tag:paid)")); err != nil {
		t.Fatal(err)
	}
	countIs(strconv.FormatInt(active, 10) + " active")
	headless.Shot(t, ctx, "console-segments")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#segment-form button[type=submit]:not([data-count-button])`))); err != nil {
		t.Fatal(err)
	}
	var seg store.Segment
	poll.Until(t, 30*time.Second, func() error {
		var err error
		seg, err = e.st.GetSegment(context.Background(), "Beta, unpaid")
		return err
	})
	if typed := "topic:updates AND (tag:beta AND NOT tag:paid)"; seg.Expr != typed {
		t.Fatalf("saved %q, typed %q", seg.Expr, typed)
	}
	poll.Until(t, 30*time.Second, func() error {
		main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || !strings.Contains(main, "The segment was saved.") || !strings.Contains(main, "Segment: Beta, unpaid") {
			return fmt.Errorf("after the save the page reads %q (%v)", main, err)
		}
		return nil
	})
	headless.Shot(t, ctx, "console-segment-saved")

	// The issue editor: the segment as the audience.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/admin/issues/new"),
		chromedp.WaitVisible(chromedp.CSS("#editor")),
		chromedp.SendKeys(chromedp.CSS("#subject"), "For the beta"),
		chromedp.SendKeys(chromedp.CSS("#body"), "Thank you for testing the beta."),
		chromedp.Click(chromedp.CSS("#audience-segment")),
		chromedp.SetValue(chromedp.CSS("#segment"), strconv.FormatInt(seg.ID, 10)),
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("input[name=topics]").forEach((c) => { c.checked = false })`),
	); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#preview-status")))
		if err != nil || got != "Live preview" {
			return fmt.Errorf("the preview's status reads %q (%v)", got, err)
		}
		return nil
	})
	headless.Shot(t, ctx, "console-issue-segment")
	if err := chromedp.Do(ctx, chromedp.Submit(chromedp.CSS("#editor"))); err != nil {
		t.Fatal(err)
	}
	var is store.Issue
	poll.Until(t, 30*time.Second, func() error {
		list, err := e.st.ListIssues(context.Background(), "", 0, 10)
		if err != nil || len(list) != 1 {
			return fmt.Errorf("issues %d (%v)", len(list), err)
		}
		is = list[0]
		return nil
	})
	if is.Segment != seg.ID || len(is.Topics) != 0 || is.Subject != "For the beta" {
		t.Fatalf("the issue saved: %+v", is)
	}
	want := "This issue reaches " + strconv.FormatInt(active, 10) + " readers now: the active people of the segment Beta, unpaid"
	poll.Until(t, 30*time.Second, func() error {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p[data-field="audience"]`)))
		if err != nil || !strings.Contains(got, want) {
			return fmt.Errorf("the send step reads %q (%v), want %q", got, err, want)
		}
		return nil
	})
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(`p[data-field="audience"]`))); err != nil {
		t.Fatal(err)
	}
	headless.Shot(t, ctx, "console-issue-segment-send")
}
