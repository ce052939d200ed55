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

// TestTrashUndoInChromium: an editor deletes an issue in a real browser
// (through the confirm page), sees the "Moved to trash — Undo" banner,
// undoes; deletes it again and restores it from the Trash view. Each
// step is checked in the store, and every form is a plain POST (no
// script needed).
func TestTrashUndoInChromium(t *testing.T) {
	e := newEnv(t)
	is, err := e.st.CreateIssue(context.Background(), store.IssueContent{Subject: "Moths at night", Body: "Lanterns", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/admin/issues/%d", is.ID)
	ctx := headless.New(t, 900, 1200)
	mainReads := func(want string) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
			if err != nil || !strings.Contains(main, want) {
				return fmt.Errorf("the page reads %q (%v), want %q", main, err, want)
			}
			return nil
		})
	}
	statusIs := func(want string) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			got, err := e.st.Issue(context.Background(), is.ID)
			if err != nil || got.Status != want {
				return fmt.Errorf("the issue is %q (%v), want %q", got.Status, err, want)
			}
			return nil
		})
	}
	del := func() {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.Navigate(e.srv.URL+path),
			chromedp.Click(chromedp.CSS(`a[href="`+path+`/delete"]`)),
			chromedp.WaitVisible(chromedp.CSS("[data-confirm]")),
		); err != nil {
			t.Fatal(err)
		}
		mainReads("Move “Moths at night” to the trash?")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-confirm] button[type=submit]`))); err != nil {
			t.Fatal(err)
		}
		statusIs(store.IssueTrashed)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/admin/login?next="+path),
		chromedp.SendKeys(chromedp.CSS("#token"), editorToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="`+path+`/delete"]`)),
	); err != nil {
		t.Fatal(err)
	}
	del()
	mainReads("Moved to trash —")
	headless.Shot(t, ctx, "console-trash-undo")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form[data-undo] button`))); err != nil {
		t.Fatal(err)
	}
	statusIs(store.IssueDraft)
	mainReads("Restored from the trash, as it was.")

	del()
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href="/admin/issues?trash=1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="`+path+`/restore"]`)),
	); err != nil {
		t.Fatal(err)
	}
	mainReads("Moths at night")
	headless.Shot(t, ctx, "console-trash")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`td form[action="`+path+`/restore"] button`))); err != nil {
		t.Fatal(err)
	}
	statusIs(store.IssueDraft)
	mainReads("Restored from the trash, as it was.")
}
