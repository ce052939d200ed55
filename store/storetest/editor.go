package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// testIssueVersionsAndDelete: each save keeps the content before it,
// numbered by the version it had, the last MaxIssueVersions of them;
// then the trash (testIssueTrash).
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

	testIssueTrash(t, s, is, c)
}

// testIssueTrash: a draft goes to the trash and out of the list, comes
// back as it was; a scheduled one comes back a draft, a sent one sent
// (the archive's generation grows both ways); a cancelled one is
// refused; a purge removes what was trashed before its time, with its
// versions, and frees its slug.
func testIssueTrash(t *testing.T, s store.Store, is store.Issue, c store.IssueContent) {
	ctx := context.Background()
	trashed, err := s.TrashIssue(ctx, is.ID)
	if err != nil || trashed.Status != store.IssueTrashed || trashed.TrashedFrom != store.IssueDraft || trashed.TrashedAt.IsZero() {
		t.Fatalf("trash a draft: %+v %v", trashed, err)
	}
	if list, _ := s.ListIssues(ctx, "", 0, 100); slices.ContainsFunc(list, func(x store.Issue) bool { return x.ID == is.ID }) {
		t.Fatal("a trashed issue is in the list")
	}
	if list, _ := s.ListIssues(ctx, store.IssueTrashed, 0, 100); len(list) != 1 || list[0].ID != is.ID {
		t.Fatalf("the trash: %+v", list)
	}
	if back, err := s.RestoreIssue(ctx, is.ID); err != nil || back.Status != store.IssueDraft || back.Version != is.Version || back.TrashedFrom != "" {
		t.Fatalf("restore: %+v %v", back, err)
	}
	var state *store.StateError
	if _, err := s.RestoreIssue(ctx, is.ID); !errors.As(err, &state) || state.Status != store.IssueDraft {
		t.Fatalf("restore a draft: %v", err)
	}
	sched, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueScheduled,
		store.IssueChange{SetSchedule: true, SendAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.TrashIssue(ctx, is.ID); err != nil || got.Round != sched.Round+1 {
		t.Fatalf("trash a scheduled issue: %+v %v (its plan's round must be void)", got, err)
	}
	if back, err := s.RestoreIssue(ctx, is.ID); err != nil || back.Status != store.IssueDraft || !back.SendAt.IsZero() {
		t.Fatalf("a scheduled issue restored: %+v %v, want a draft with no schedule", back, err)
	}
	if _, err := s.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueCancelled, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrashIssue(ctx, is.ID); !errors.As(err, &state) || state.Status != store.IssueCancelled {
		t.Fatalf("trash a cancelled issue: %v", err)
	}
	if _, err := s.TrashIssue(ctx, 999999); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("trash no issue: %v", err)
	}
	sent, err := s.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionIssue(ctx, sent.ID, []string{store.IssueDraft}, store.IssueSent, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	gen, _ := s.ArchiveGeneration(ctx)
	if _, err := s.TrashIssue(ctx, sent.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.ArchiveGeneration(ctx); g != gen+1 {
		t.Fatalf("trashing a sent issue: archive generation %d, want %d", g, gen+1)
	}
	if back, err := s.RestoreIssue(ctx, sent.ID); err != nil || back.Status != store.IssueSent {
		t.Fatalf("a sent issue restored: %+v %v", back, err)
	}
	if g, _ := s.ArchiveGeneration(ctx); g != gen+2 {
		t.Fatalf("restoring a sent issue: archive generation %d, want %d", g, gen+2)
	}
	testPurge(t, s, c)
}

// testPurge: a purge before the trashing removes nothing; after it, the
// issue, its versions and its slug are gone.
func testPurge(t *testing.T, s store.Store, c store.IssueContent) {
	ctx := context.Background()
	c.Subject = "Purged soon"
	is, err := s.CreateIssue(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateIssue(ctx, is.ID, 1, c); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	if _, err := s.TrashIssue(ctx, is.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PurgeTrash(ctx, before, 10); err != nil || n != 0 {
		t.Fatalf("purge before the trashing: %d %v", n, err)
	}
	if n, err := s.PurgeTrash(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, err := s.Issue(ctx, is.ID); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("a purged issue: %v", err)
	}
	if list, _ := s.ListIssues(ctx, store.IssueTrashed, 0, 10); len(list) != 0 {
		t.Fatalf("the trash after a purge: %+v", list)
	}
	again, err := s.CreateIssue(ctx, c, "")
	if err != nil || again.Slug != is.Slug {
		t.Fatalf("the purged issue's slug %q is not free: %+v %v", is.Slug, again, err)
	}
	if vs, _ := s.IssueVersions(ctx, again.ID); len(vs) != 0 {
		t.Fatalf("a new issue has versions: %+v", vs)
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
