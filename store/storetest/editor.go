package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// testIssueVersionsAndDelete: each save keeps the content before it,
// numbered by the version it had, the last MaxIssueVersions of them; a
// draft is deleted with its versions and its slug freed; another status
// refuses.
func testIssueVersionsAndDelete(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	c := store.IssueContent{Subject: "Drafty", Body: "v1", Topics: []string{"digest"}, ReplyTo: "editor@example.com"}
	is, err := s.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if vs, err := s.IssueVersions(ctx, is.ID); err != nil || len(vs) != 0 {
		t.Fatalf("a new issue's versions: %+v %v", vs, err)
	}
	saves := store.MaxIssueVersions + 5
	for v := 1; v <= saves; v++ {
		c.Body = "v" + strconv.Itoa(v+1)
		if is, err = s.UpdateIssue(ctx, is.ID, v, c); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := s.IssueVersions(ctx, is.ID)
	if err != nil || len(vs) != store.MaxIssueVersions {
		t.Fatalf("versions after %d saves: %d %v", saves, len(vs), err)
	}
	for i, v := range vs {
		want := saves + 1 - store.MaxIssueVersions + i
		if v.Version != want || v.Body != "v"+strconv.Itoa(want) || v.ReplyTo != "editor@example.com" {
			t.Fatalf("version %d: %+v, want number %d", i, v, want)
		}
	}
	if got, _ := s.Issue(ctx, is.ID); got.Version != saves+1 || got.ReplyTo != "editor@example.com" {
		t.Fatalf("issue: %+v", got)
	}
	if _, err := s.IssueVersions(ctx, 999999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("versions of no issue: %v", err)
	}

	if err := s.DeleteIssue(ctx, is.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Issue(ctx, is.ID); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("deleted issue: %v", err)
	}
	if err := s.DeleteIssue(ctx, is.ID); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("second delete: %v", err)
	}
	again, err := s.CreateIssue(ctx, c, "")
	if err != nil || again.Slug != "drafty" {
		t.Fatalf("the deleted draft's slug is not free: %+v %v", again, err)
	}
	if vs, _ := s.IssueVersions(ctx, again.ID); len(vs) != 0 {
		t.Fatalf("a new issue has versions: %+v", vs)
	}
	if _, err := s.TransitionIssue(ctx, again.ID, []string{store.IssueDraft}, store.IssueCancelled, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	var state *store.StateError
	if err := s.DeleteIssue(ctx, again.ID); !errors.As(err, &state) || state.Status != store.IssueCancelled {
		t.Fatalf("delete a cancelled issue: %v", err)
	}
	if _, err := s.Issue(ctx, again.ID); err != nil {
		t.Fatalf("a refused delete removed the issue: %v", err)
	}
}

// testItemEditAndDelete: an item's text changes in place (id, topic and
// time stay); a deleted one is gone from its topic's list.
func testItemEditAndDelete(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	a, err := s.AddItem(ctx, store.Item{Title: "A", URL: "https://example.com/a", Topic: "news"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AddItem(ctx, store.Item{Title: "B", URL: "https://example.com/b", Topic: "news"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateItem(ctx, store.Item{ID: a.ID, Title: "A2", URL: "https://example.com/a2", Summary: "s", Topic: "ignored"})
	if err != nil || got.Title != "A2" || got.URL != "https://example.com/a2" || got.Summary != "s" || got.Topic != "news" || !got.PublishedAt.Equal(a.PublishedAt) {
		t.Fatalf("updated: %+v %v", got, err)
	}
	if err := s.DeleteItem(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	list, err := s.ItemsAfter(ctx, "news", 0, 10)
	if err != nil || len(list) != 1 || list[0].ID != a.ID || list[0].Title != "A2" {
		t.Fatalf("items after: %+v %v", list, err)
	}
	if err := s.DeleteItem(ctx, b.ID); !errors.Is(err, store.ErrNoItem) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.UpdateItem(ctx, store.Item{ID: b.ID, Title: "x", URL: "https://example.com"}); !errors.Is(err, store.ErrNoItem) {
		t.Fatalf("update a deleted item: %v", err)
	}
	if _, err := s.Item(ctx, b.ID); !errors.Is(err, store.ErrNoItem) {
		t.Fatalf("a deleted item: %v", err)
	}
}

// testWebhookDeliveries: an endpoint's log keeps its last
// MaxWebhookDeliveries attempts, newest first, and goes with it.
func testWebhookDeliveries(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	hook, err := s.AddWebhook(ctx, store.Webhook{ID: "wh_log", URL: "https://example.com/h", Events: []string{"issue.sent"}, Secret: "whsec_x"})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := s.WebhookDeliveries(ctx, hook.ID); err != nil || len(list) != 0 {
		t.Fatalf("a new endpoint's log: %+v %v", list, err)
	}
	n := store.MaxWebhookDeliveries + 3
	for i := range n {
		d := store.WebhookDelivery{Event: "msg_" + strconv.Itoa(i), Type: "issue.sent", OK: i%2 == 0, Status: 200}
		if !d.OK {
			d.Status, d.Error = 500, "the endpoint answered 500"
		}
		if err := s.RecordWebhookDelivery(ctx, hook.ID, d); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.WebhookDeliveries(ctx, hook.ID)
	if err != nil || len(list) != store.MaxWebhookDeliveries {
		t.Fatalf("log: %d %v", len(list), err)
	}
	if list[0].Event != "msg_"+strconv.Itoa(n-1) || list[0].At.IsZero() || list[1].Status != 500 || list[1].Error == "" {
		t.Fatalf("newest first: %+v", list[:2])
	}
	if err := s.DeleteWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordWebhookDelivery(ctx, hook.ID, store.WebhookDelivery{Event: "late"}); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatalf("a removed endpoint's delivery: %v", err)
	}
	if _, err := s.WebhookDeliveries(ctx, hook.ID); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatalf("a removed endpoint's log: %v", err)
	}
}
