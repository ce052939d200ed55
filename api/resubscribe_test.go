package api

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// undoForm finds the resubscribe button's token in a page.
var undoForm = regexp.MustCompile(`<form method="post" action="/resubscribe" class="leave">\s*<input type="hidden" name="token" value="([^"]+)">`)

func undoTokenIn(t *testing.T, page string) string {
	t.Helper()
	m := undoForm.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no resubscribe button on the page:\n%s", page)
	}
	return html.UnescapeString(m[1])
}

// TestResubscribeUndoesExactlyWhatWasLeft: the page after an unsubscribe
// (the unsubscribe page's button for one topic, the preference centre's
// Leave everything) offers a Resubscribe button; its POST turns on
// exactly the topics just left, and nothing else. GET and HEAD of it
// change nothing; another site's post, a forged or expired token are
// refused; the one-click of RFC 8058 offers nothing.
func TestResubscribeUndoesExactlyWhatWasLeft(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: false, Topics: threeTopics(t), Origin: origin})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"r@x.io","topics":["digest","updates"],"name":"Rae"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	topicsOf := func() (store.Status, []string) {
		sub, err := e.store.Get(ctx, "r@x.io")
		if err != nil {
			t.Fatal(err)
		}
		return sub.Status, sub.Topics
	}

	// One topic, through the unsubscribe page's button.
	resp, page := e.prefsPost(t, "/unsubscribe", origin, url.Values{"token": {e.signTopic(t, token.Unsubscribe, "r@x.io", "updates")}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("unsubscribe: %d %s", resp.StatusCode, page)
	}
	undo := undoTokenIn(t, page)
	if st, tps := topicsOf(); st != store.Active || !slices.Equal(tps, []string{"digest"}) {
		t.Fatalf("after leaving updates: %s %v", st, tps)
	}
	for _, m := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(m, e.srv.URL+"/resubscribe?token="+url.QueryEscape(undo), nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s /resubscribe: %d, want 405", m, resp.StatusCode)
		}
	}
	if resp, _ := e.prefsPost(t, "/resubscribe", "https://evil.example", url.Values{"token": {undo}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another site's post: %d", resp.StatusCode)
	}
	forged := e.signer.SignTopic(token.Unsubscribe, 1, "updates")
	later := e.signer.WithClock(func() time.Time { return time.Now().Add(-token.ResubscribeTTL - time.Hour) })
	sub, _ := e.store.Get(ctx, "r@x.io")
	for name, bad := range map[string]string{"an unsubscribe token": forged, "an expired one": later.SignTopic(token.Resubscribe, sub.ID, "updates"), "none": ""} {
		if resp, body := e.prefsPost(t, "/resubscribe", origin, url.Values{"token": {bad}}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	if st, tps := topicsOf(); st != store.Active || !slices.Equal(tps, []string{"digest"}) {
		t.Fatalf("a refused resubscribe changed %s %v", st, tps)
	}
	resp, page = e.prefsPost(t, "/resubscribe", origin, url.Values{"token": {undo}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "You are subscribed again") || !strings.Contains(page, "Product updates") {
		t.Fatalf("resubscribe: %d %s", resp.StatusCode, page)
	}
	if st, tps := topicsOf(); st != store.Active || !slices.Equal(tps, []string{"digest", "updates"}) {
		t.Fatalf("after the undo: %s %v, want digest and updates", st, tps)
	}

	// Everything, through the preference centre.
	resp, page = e.prefsPost(t, "/preferences", origin, url.Values{"token": {e.sign(t, token.Preferences, "r@x.io")}, "leave": {"all"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "You are unsubscribed") {
		t.Fatalf("leave everything: %d %s", resp.StatusCode, page)
	}
	undo = undoTokenIn(t, page)
	if st, _ := topicsOf(); st != store.Unsubscribed {
		t.Fatalf("after leaving everything: %s", st)
	}
	if resp, page = e.prefsPost(t, "/resubscribe", origin, url.Values{"token": {undo}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("resubscribe: %d %s", resp.StatusCode, page)
	}
	if st, tps := topicsOf(); st != store.Active || !slices.Equal(tps, []string{"digest", "updates"}) {
		t.Fatalf("after the undo of everything: %s %v, want active with digest and updates (research was never chosen)", st, tps)
	}
	if got, _ := e.store.Get(ctx, "r@x.io"); got.Name != "Rae" {
		t.Fatalf("the undo lost the name: %+v", got)
	}

	// RFC 8058's one-click answers no page: nothing to offer.
	resp, body := e.post(t, "/unsubscribe?token="+url.QueryEscape(e.signTopic(t, token.Unsubscribe, "r@x.io", "digest")), formCT, "List-Unsubscribe=One-Click")
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "resubscribe") {
		t.Fatalf("one-click: %d %s", resp.StatusCode, body)
	}
}

// TestPreferencesLinkExpiresAndMasksTheAddress: a preferences link works
// for 90 days; past it the page says it expired, shows nothing of the
// person, and offers to mail a fresh link (POST /preferences/fresh: to
// the address the link named, held per mailbox, the same answer whether
// or not the person is on the list). A working one shows the address
// masked.
func TestPreferencesLinkExpiresAndMasksTheAddress(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Origin: "https://news.example.com", SubscribeRate: 100,
		ConfirmHold: store.ConfirmHold{Every: time.Hour, PerDay: ConfirmationsPerDay}})
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"jane@example.com"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	sub, _ := e.store.Get(context.Background(), "jane@example.com")
	resp, page := e.get(t, "/preferences?token="+url.QueryEscape(e.sign(t, token.Preferences, "jane@example.com")))
	if resp.StatusCode != 200 || !strings.Contains(page, "j***@e***.com") || strings.Contains(page, "jane@") {
		t.Fatalf("the page: %d %s", resp.StatusCode, page)
	}
	old := e.signer.WithClock(func() time.Time { return time.Now().Add(-token.PreferencesTTL - time.Hour) }).Sign(token.Preferences, sub.ID)
	resp, page = e.get(t, "/preferences?token="+url.QueryEscape(old))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "This link has expired") || strings.Contains(page, "j***") {
		t.Fatalf("a link past 90 days: %d %s", resp.StatusCode, page)
	}
	if resp, _ := e.prefsPost(t, "/preferences", "", url.Values{"token": {old}, "leave": {"all"}}); resp.StatusCode != http.StatusBadRequest || e.status(t, "jane@example.com") != store.Active {
		t.Fatalf("a post with an expired link: %d", resp.StatusCode)
	}
	// Its page's button mails a fresh link to the address the link
	// named: one task, then held by the mailbox's allowance; the answer
	// is the same, and the same for a person no longer on the list.
	fresh := undoFormOf(t, page, "/preferences/fresh")
	if fresh != old {
		t.Fatalf("the expired page's button carries %q, want the expired token", fresh)
	}
	const origin = "https://news.example.com"
	var answers []string
	for range 2 {
		resp, body := e.prefsPost(t, "/preferences/fresh", origin, url.Values{"token": {fresh}})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("fresh link: %d %s", resp.StatusCode, body)
		}
		answers = append(answers, body)
	}
	if info, err := e.insp.GetTaskInfo(tasks.QueueTransactional, tasks.PreferencesLinkTaskID("jane@example.com")); err != nil || info.Type != tasks.TypePreferencesEmail {
		t.Fatalf("the fresh link's task: %+v %v", info, err)
	}
	if n := e.taskCount(t, tasks.QueueTransactional); n != 1 {
		t.Fatalf("%d transactional tasks, want the one fresh link (the second ask held)", n)
	}
	gone := e.signer.WithClock(func() time.Time { return time.Now().Add(-token.PreferencesTTL - time.Hour) }).Sign(token.Preferences, sub.ID+1000)
	resp, body := e.prefsPost(t, "/preferences/fresh", origin, url.Values{"token": {gone}})
	if resp.StatusCode != http.StatusAccepted || body != answers[0] || answers[1] != answers[0] {
		t.Fatalf("the answers differ: %d\n%s\n%s\n%s", resp.StatusCode, answers[0], answers[1], body)
	}
	if resp, _ := e.prefsPost(t, "/preferences/fresh", "https://evil.example", url.Values{"token": {fresh}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another site's post: %d", resp.StatusCode)
	}
	if resp, _ := e.prefsPost(t, "/preferences/fresh", origin, url.Values{"token": {"forged"}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged token: %d", resp.StatusCode)
	}
}

// undoFormOf finds the token of the page's form posting to action.
func undoFormOf(t *testing.T, page, action string) string {
	t.Helper()
	m := regexp.MustCompile(`<form method="post" action="` + regexp.QuoteMeta(action) + `" class="leave">\s*<input type="hidden" name="token" value="([^"]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form posting to %s:\n%s", action, page)
	}
	return html.UnescapeString(m[1])
}

// TestPreferenceCentreOffersOnlyConfiguredChannels: without web push,
// FCM or APNs the page offers no Notifications, and a save (even one
// crafted to name push) keeps the stored push choice as it was.
func TestPreferenceCentreOffersOnlyConfiguredChannels(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: false, Topics: threeTopics(t), Origin: origin})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"c@x.io","topics":["digest","updates"]}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	sub, _ := e.store.Get(ctx, "c@x.io")
	if err := e.store.SetChannels(ctx, sub.ID, "updates", []string{store.ChannelEmail, store.ChannelPush}); err != nil {
		t.Fatal(err)
	}
	tok := e.sign(t, token.Preferences, "c@x.io")
	_, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if strings.Contains(page, ":push") || strings.Contains(page, "Notifications") || !strings.Contains(page, `value="updates:email" checked`) {
		t.Fatalf("push is not configured, yet:\n%s", page)
	}
	resp, _ := e.prefsPost(t, "/preferences", origin, url.Values{"token": {tok}, "topics": {"digest", "updates"}, "channels_shown": {"1"},
		"channels": {"digest:email", "digest:push", "updates:email"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", resp.StatusCode)
	}
	got, _ := e.store.ChannelsOf(ctx, []int64{sub.ID})
	if !got[0].Wants("updates", store.ChannelPush) || !got[0].Wants("updates", store.ChannelEmail) || !got[0].Wants("digest", store.ChannelEmail) {
		t.Fatalf("the save changed a channel not offered: %+v", got[0])
	}
	for _, cfg := range []Config{{AppPush: true}, {VAPIDPublicKey: "BOr1tK"}} {
		cfg.DoubleOptIn, cfg.Topics = false, threeTopics(t)
		on := newEnv(t, cfg)
		if resp, _ := on.post(t, "/subscribe", jsonCT, `{"email":"c@x.io"}`); resp.StatusCode != 202 {
			t.Fatal(resp.StatusCode)
		}
		if _, page := on.get(t, "/preferences?token="+url.QueryEscape(on.sign(t, token.Preferences, "c@x.io"))); !strings.Contains(page, `value="updates:push"`) {
			t.Fatalf("%+v: no Notifications offered:\n%s", cfg, page)
		}
	}
}
