package worker

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// queuedFor reads the fan-out's queue: per channel, the readers it queued
// a task for (an event mail batch counts for each of its readers).
func queuedFor(t *testing.T, rec *recordQueue) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, task := range rec.tasks {
		switch task.Type() {
		case tasks.TypeEventMail:
			var p tasks.EventMailPayload
			if err := json.Unmarshal(task.Payload(), &p); err != nil {
				t.Fatal(err)
			}
			out[store.ChannelEmail] = append(out[store.ChannelEmail], p.IDs...)
		case tasks.TypePush:
			var p tasks.PushPayload
			if err := json.Unmarshal(task.Payload(), &p); err != nil {
				t.Fatal(err)
			}
			out[store.ChannelPush] = append(out[store.ChannelPush], p.SubscriberID)
		case tasks.TypeSMS:
			var p tasks.SMSPayload
			if err := json.Unmarshal(task.Payload(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Text != "Sale https://shop.example/sale" {
				t.Fatalf("the text %q", p.Text)
			}
			out[store.ChannelSMS] = append(out[store.ChannelSMS], p.SubscriberID)
		default:
			t.Fatalf("queued %s", task.Type())
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// TestFanoutFollowsEachReadersChannels: a topic's event goes to each
// reader by the channels they chose for that topic (e-mail and push by
// default, SMS only when turned on), and an event that names channels
// goes by those alone.
func TestFanoutFollowsEachReadersChannels(t *testing.T) {
	d := newDelivery(t)
	svc, _ := newPushService(t)
	ctx := context.Background()
	emails := seed(t, d.store, "c", 3, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })
	var ids []int64
	for _, e := range emails {
		sub, _ := addBrowser(t, d.store, svc, e)
		ids = append(ids, sub.ID)
	}
	dflt, textOnly, all := ids[0], ids[1], ids[2]
	if err := d.store.SetChannels(ctx, textOnly, topics.Updates, []string{store.ChannelSMS}); err != nil {
		t.Fatal(err)
	}
	if err := d.store.SetChannels(ctx, all, topics.Updates, store.AllChannels); err != nil {
		t.Fatal(err)
	}
	// A choice for another topic changes nothing for this one.
	if err := d.store.SetChannels(ctx, dflt, topics.Digest, nil); err != nil {
		t.Fatal(err)
	}
	fan := func(id string, channels []string) map[string][]int64 {
		rec := &recordQueue{}
		f := d.fanout()
		f.Queue = rec
		p := tasks.FanoutPayload{ID: id, Topic: topics.Updates, Title: "Sale", URL: "https://shop.example/sale", At: time.Now(), Channels: channels}
		if err := runTask(ctx, tasks.Fanout, f.HandleFanout, tasks.NewFanout(p)); err != nil {
			t.Fatal(err)
		}
		return queuedFor(t, rec)
	}
	got := fan("ev_a", nil)
	if !slices.Equal(got[store.ChannelEmail], []int64{dflt, all}) || !slices.Equal(got[store.ChannelPush], []int64{dflt, all}) ||
		!slices.Equal(got[store.ChannelSMS], []int64{textOnly, all}) {
		t.Fatalf("by each reader's channels: %v", got)
	}
	got = fan("ev_b", []string{store.ChannelSMS})
	if len(got[store.ChannelEmail]) != 0 || len(got[store.ChannelPush]) != 0 || !slices.Equal(got[store.ChannelSMS], []int64{textOnly, all}) {
		t.Fatalf("an event for SMS alone: %v", got)
	}
}

// TestIssueSkipsWhoTurnedEmailOff: an issue's batch mails only the
// readers who get its topic by e-mail; one who turned e-mail off for it
// is skipped and counted so.
func TestIssueSkipsWhoTurnedEmailOff(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	a, b := activate(t, st, "mail@x.org"), activate(t, st, "nomail@x.org")
	if err := st.SetChannels(ctx, b.ID, topics.Digest, []string{store.ChannelPush}); err != nil {
		t.Fatal(err)
	}
	st.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	_, is := digestIssue(t, st, "ch1")
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, a.ID, b.ID)); err != nil {
		t.Fatal(err)
	}
	run, _ := st.DigestRun(ctx, "ch1")
	if rec.count() != 1 || rec.sent[0].To != "mail@x.org" || run.Sent != 1 || run.Skipped != 1 {
		t.Fatalf("%d mails, run %+v", rec.count(), run)
	}
}
