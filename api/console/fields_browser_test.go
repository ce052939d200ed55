package console_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	headless "github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

// TestListDataInChromium: an admin in a real browser declares a choice
// field on the Fields screen, sets it and a tag on a person's page, sees
// that person among a segment's people, saves a team test list in the
// settings and finds it offered on an issue's test-send form (issue #46
// points 1 and 7).
func TestListDataInChromium(t *testing.T) {
	e := newEnv(t)
	bg := context.Background()
	ada := e.subscribe(t, "ada@example.com", "digest")
	// The tag known before the browser gives it to Ada: a segment names
	// only tags given to someone.
	bob := e.subscribe(t, "bob@example.com", "digest")
	if _, err := e.st.AddTags(bg, bob.ID, []string{"vip"}); err != nil {
		t.Fatal(err)
	}
	seg, err := e.st.CreateSegment(bg, "VIPs", "tag:vip")
	if err != nil {
		t.Fatal(err)
	}
	is, err := e.st.CreateIssue(bg, store.IssueContent{Subject: "Team test", Body: "Hello", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := headless.New(t, 1100, 1200)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("sign in and declare a field",
		chromedp.Navigate(e.srv.URL+"/admin/login?next=/admin/fields"),
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#field-declare")),
		chromedp.SetValue(chromedp.CSS("#field-name"), "plan"),
		chromedp.SetValue(chromedp.CSS("#field-type"), "choice"),
		chromedp.SetValue(chromedp.CSS("#field-choices"), "free\npro"),
		chromedp.Submit(chromedp.CSS("#field-declare")))
	poll.Until(t, 30*time.Second, func() error {
		defs, err := e.st.FieldDefs(bg)
		if err != nil || len(defs) != 1 || !reflect.DeepEqual(defs[0].Choices, []string{"free", "pro"}) {
			return fmt.Errorf("declared %v (%v)", defs, err)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || !strings.Contains(main, "The field was declared.") {
			return fmt.Errorf("the Fields screen reads %q (%v)", main, err)
		}
		return nil
	})
	headless.Shot(t, ctx, "console-fields")

	step("set the field and a tag on a person",
		chromedp.Navigate(e.srv.URL+"/admin/subscribers/"+itoa(ada.ID)),
		chromedp.WaitVisible(chromedp.CSS("#edit-field-plan")),
		chromedp.SetValue(chromedp.CSS("#edit-tags"), "vip"),
		chromedp.SetValue(chromedp.CSS("#edit-field-plan"), "pro"),
		chromedp.Submit(chromedp.CSS("#edit")))
	poll.Until(t, 30*time.Second, func() error {
		sub, err := e.st.Get(bg, "ada@example.com")
		if err != nil || !reflect.DeepEqual(sub.Tags, []string{"vip"}) || sub.Fields["plan"] != "pro" {
			return fmt.Errorf("the person: tags %v, fields %v (%v)", sub.Tags, sub.Fields, err)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`dd[data-field="field-plan"]`)))
		if err != nil || got != "pro" {
			return fmt.Errorf("the page shows plan %q (%v)", got, err)
		}
		return nil
	})
	headless.Shot(t, ctx, "console-person-fields")

	step("see the segment's people",
		chromedp.Navigate(e.srv.URL+"/admin/segments/"+itoa(seg.ID)),
		chromedp.WaitVisible(chromedp.CSS("#segment-people")))
	if got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#segment-people tbody"))); err != nil || !strings.Contains(got, "ada@example.com") {
		t.Fatalf("the segment's people read %q (%v)", got, err)
	}
	headless.Shot(t, ctx, "console-segment-people")

	step("save a team test list",
		chromedp.Navigate(e.srv.URL+"/admin/settings"),
		chromedp.WaitVisible(chromedp.CSS("#settings")),
		chromedp.SetValue(chromedp.CSS("#test_recipients"), "Team@Example.com, lead@example.com"),
		chromedp.Submit(chromedp.CSS("#settings")))
	poll.Until(t, 30*time.Second, func() error {
		s, err := e.st.Settings(bg)
		if err != nil || !reflect.DeepEqual(s.TestRecipients, []string{"team@example.com", "lead@example.com"}) {
			return fmt.Errorf("saved %v (%v)", s.TestRecipients, err)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || !strings.Contains(main, "Saved.") {
			return fmt.Errorf("after the save the page reads %q (%v)", main, err)
		}
		return nil
	})

	step("open the issue's test send",
		chromedp.Navigate(e.srv.URL+"/admin/issues/"+itoa(is.ID)),
		chromedp.WaitVisible(chromedp.CSS("#test-offer")))
	got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#test-offer")))
	if err != nil || !strings.Contains(got, "team@example.com") || !strings.Contains(got, "lead@example.com") {
		t.Fatalf("the test-send form offers %q (%v)", got, err)
	}
	step("scroll to the test send", chromedp.ScrollIntoView(chromedp.CSS("#test-offer")))
	headless.Shot(t, ctx, "console-test-offer")
}
