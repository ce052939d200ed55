package store

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
)

// testdata/v2-layout.json was written by the store of layout 2 before
// topics (commit 73b89df) through its own methods (testdata/README.md).
// The upgrade gives its pending and active subscribers the default topics
// and nobody else any; a second run changes nothing, not even for a
// person who changed their topics in between.
func TestMigrateGivesDefaultTopics(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixtureFile(t, rdb, "testdata/v2-layout.json")
	set, err := topics.Parse([]byte(`topics:
- {id: digest, name: Digest, default: true}
- {id: updates, name: Updates, default: true}
- {id: research, name: Research, default: false}
`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := NewRedis(rdb).WithTopics(set)
	before := map[string]Subscriber{}
	for _, email := range []string{"ann@example.com", "bob@example.com", "carl@example.com", "dora@example.com", "fred@example.com", "eve.o'neil+news@xn--bcher-kva.de", "reader000@example.org", "reader199@example.org"} {
		sub, err := s.Get(ctx, email)
		if err != nil || len(sub.Topics) != 0 {
			t.Fatalf("%s before the upgrade: %+v %v", email, sub, err)
		}
		before[email] = sub
	}
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	for email, b := range before {
		got, err := s.Get(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		want := b
		want.Topics = []string{}
		if b.Status == Active || b.Status == Pending {
			want.Topics = []string{"digest", "updates"} // not research: it is off by default
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after the upgrade:\n got %+v\nwant %+v", email, got, want)
		}
	}
	// The digest's audience: every active one (ann, eve, 200 readers).
	walked := walkAudience(t, s, topics.Digest, 64)
	if len(walked) != 202 || walked[0] != before["ann@example.com"].ID {
		t.Fatalf("digest audience after the upgrade: %d ids from %v", len(walked), walked[:min(3, len(walked))])
	}
	// What was there still works: the run's sent mark, ann's welcome.
	sent, err := s.SentMarks(ctx, []Mark{{Kind: "digest", Key: "2026-W49", SubscriberID: 1, Shared: true}, {Kind: "welcome", SubscriberID: 1, Shared: true}})
	if err != nil || !slices.Equal(sent, []bool{true, true}) {
		t.Fatalf("marks after the upgrade: %v %v", sent, err)
	}

	// A reader drops a topic; then the migration runs again from scratch
	// (as after a crash before it recorded itself done).
	if _, err := s.LeaveTopic(ctx, "reader000@example.org", "updates", Cancel{}); err != nil {
		t.Fatal(err)
	}
	migrateAgainChangesNothing(t, rdb, s, keyTopicsFilled)
	if got, _ := s.Get(ctx, "reader000@example.org"); !slices.Equal(got.Topics, []string{"digest"}) {
		t.Fatalf("the reader's choice after the second run: %v", got.Topics)
	}
}

// A subscriber who signed up with topics after the upgrade began is never
// given the defaults, even by a migration that reaches them later.
func TestMigrateLeavesChosenTopics(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb)
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: fmt.Sprintf("c%d@x.io", i), Activate: true, Topics: []string{"updates"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Del(ctx, keyTopicsFilled).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got, _ := s.Get(ctx, fmt.Sprintf("c%d@x.io", i)); !slices.Equal(got.Topics, []string{"updates"}) {
			t.Fatalf("c%d: %v", i, got.Topics)
		}
	}
}
