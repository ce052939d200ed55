package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// dumpAll reads every key of the database and every value in it, as text
// (binary bitmaps included), by SCAN: what someone holding a copy of the
// Redis could read.
func dumpAll(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		case "none":
			continue // expired between SCAN and TYPE
		default:
			t.Fatalf("key %s: type %s not dumped", k, typ)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		out[k] = fmt.Sprint(v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The erase test of GDPR Art. 17: a person with everything the store can
// hold about them (name, topics, onboarding, consent, delivery marks,
// bounces and a complaint, a confirmation asked after it, a push
// subscription, mail allowances, outbox entries), erased; then no key or
// value in the whole database holds their address, in any case, or their
// name. An import afterwards does not bring them back; their own signup
// and confirmation do.
func TestEraseLeavesNoTrace(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb).WithErasure(logredact.New([]byte("test secret")).Hash)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	const email, name, nameAfter = "zoe.quartermaine@example.org", "Zoë Quartermaine", "Zoë Q. Marine"
	other := "keep@example.net"
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	entry := func(id string) outbox.Entry {
		return outbox.Entry{ID: id, Due: time.Now().Add(time.Hour), Body: []byte(`{"email":"` + email + `","name":"` + name + `"}`)}
	}
	sub, err := s.Subscribe(ctx, SubscribeRequest{Email: email, Name: name, Timezone: "Europe/Paris", Source: SourceForm,
		Outbox: entry("confirm:" + email), Hold: ConfirmHold{Every: time.Hour, PerDay: 3}})
	step("subscribe", err)
	_, err = s.Confirm(ctx, email, entry("welcome:"+email))
	step("confirm", err)
	_, err = s.Subscribe(ctx, SubscribeRequest{Email: other, Name: "Keeper", Activate: true, Outbox: outbox.Entry{ID: "welcome:" + other, Due: time.Now(), Body: []byte("x")}})
	step("other", err)
	step("push", s.AddPushSubscription(ctx, sub.ID, PushSubscription{Endpoint: "https://push.example/zoe", P256DH: []byte{4, 2}, Auth: []byte{1}}))
	step("marks", s.MarkSent(ctx,
		Mark{Kind: "confirm", Key: "n0nce", SubscriberID: sub.ID},
		Mark{Kind: "welcome", SubscriberID: sub.ID, Shared: true},
		Mark{Kind: "digest", Key: "2026-W10", SubscriberID: sub.ID, Shared: true},
		Mark{Kind: "issue", Key: "7", SubscriberID: sub.ID, Shared: true}))
	_, err = s.ClaimMarks(ctx, "task-1", []Mark{{Kind: "events", Key: "b1", SubscriberID: sub.ID}}, time.Hour)
	step("claim", err)
	_, err = s.TakeHold(ctx, HoldUnsubscribe, email, ConfirmHold{Every: time.Hour, PerDay: 3})
	step("hold", err)
	_, err = s.RecordFeedback(ctx, Feedback{ID: "smtp-1", Email: email, Type: SoftBounce}, FeedbackPolicy{})
	step("soft bounce", err)
	_, err = s.RecordFeedback(ctx, Feedback{ID: "ses-2", SubscriberID: sub.ID, Type: Complaint}, FeedbackPolicy{})
	step("complaint", err)
	// A confirmation asked for after the complaint: it keeps the new name.
	_, err = s.Subscribe(ctx, SubscribeRequest{Email: email, Name: nameAfter, Outbox: entry("confirm:" + email), Source: SourceForm})
	step("reconfirm", err)

	before := dumpAll(t, rdb)
	if !holds(before, email) || !holds(before, name) || !holds(before, nameAfter) {
		t.Fatalf("set-up: the person is not in the database to begin with")
	}
	gone, err := s.Erase(ctx, email, "confirm:"+email, "welcome:"+email)
	step("erase", err)
	if gone.ID != sub.ID {
		t.Fatalf("erased %+v, want id %d", gone, sub.ID)
	}
	after := dumpAll(t, rdb)
	for _, needle := range []string{email, name, nameAfter, "zoe.quartermaine", "quartermaine"} {
		for k, v := range after {
			if strings.Contains(strings.ToLower(k+" "+v), strings.ToLower(needle)) {
				t.Errorf("after the erase, key %s still holds %q: %.200s", k, needle, v)
			}
		}
	}
	if !holds(after, other) || !holds(after, "Keeper") {
		t.Fatal("the erase took someone else's data too")
	}

	// An import afterwards skips the address and says so.
	errs, err := s.SubscribeMany(ctx, []SubscribeRequest{{Email: email, Name: name, Activate: true, OnlyNew: true, Source: SourceImport}})
	step("import", err)
	if !errors.Is(errs[0], ErrErased) {
		t.Fatalf("import after erase: %v, want ErrErased", errs[0])
	}
	if again := dumpAll(t, rdb); holds(again, email) {
		t.Fatal("the import wrote the erased address")
	}
	// The person's own signup and confirmation bring them back.
	back, err := s.Subscribe(ctx, SubscribeRequest{Email: email, Outbox: outbox.Entry{ID: "confirm:" + email, Due: time.Now()}, Source: SourceForm})
	step("signup after erase", err)
	if back.ID == sub.ID || back.Status != Pending {
		t.Fatalf("signup after erase: %+v", back)
	}
	_, err = s.Confirm(ctx, email, outbox.Entry{})
	step("confirm after erase", err)
	if n, err := rdb.SCard(ctx, homeShard(email).key(sfxErased)).Result(); err != nil || n != 0 {
		t.Fatalf("the confirmation left %d erased markers (%v)", n, err)
	}
}

// holds tells whether any key or value holds needle, in any case.
func holds(dump map[string]string, needle string) bool {
	needle = strings.ToLower(needle)
	for k, v := range dump {
		if strings.Contains(strings.ToLower(k+" "+v), needle) {
			return true
		}
	}
	return false
}
