package store

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// testdata/v2-content.json is layout 2 as the release before layout 3
// wrote it (commit 7718591, through its store's methods; README.md):
// three subscribers, an issue edited once and scheduled, the digest's
// issue of run 2026-W49, an item, a feed's state, a stored token and a
// webhook endpoint. Start-up moves it to layout 3, and every method
// reads back what the old store wrote.
func TestUpgradeFromLayout2(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixture(t, rdb, "testdata/v2-content.json")
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkV2Content(t, s)
	if n := oldNames(t, rdb); len(n) > 0 {
		t.Errorf("layout-2 names left after the upgrade: %v", n)
	}
	before := dumpAll(t, rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Error("a second start-up changed the upgraded data")
	}
}

// An upgrade stopped half way (a crash) is finished by the next start-up:
// the keys it renamed stay, the others follow.
func TestUpgradeFromLayout2Resumes(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixture(t, rdb, "testdata/v2-content.json")
	for _, p := range layout3Keys[:len(layout3Keys)/2] {
		if err := renameScript.Run(ctx, rdb, []string{p[0], p[1]}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Rename(ctx, "nl:issue:1", prefixIssue+"1").Err(); err != nil {
		t.Fatal(err)
	}
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkV2Content(t, s)
	if n := oldNames(t, rdb); len(n) > 0 {
		t.Errorf("layout-2 names left after the upgrade: %v", n)
	}
}

// oldNames are the keys under a name layout 3 renamed.
func oldNames(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	var out []string
	for k := range dumpAll(t, rdb) {
		for _, p := range layout3Keys {
			if k == p[0] {
				out = append(out, k)
			}
		}
	keys:
		for _, f := range layout3Prefixes {
			if !strings.HasPrefix(k, f.old) {
				continue
			}
			for _, s := range f.skip {
				if strings.HasPrefix(k, s) {
					continue keys
				}
			}
			out = append(out, k)
		}
	}
	return out
}

// checkV2Content reads the fixture's content through the store.
func checkV2Content(t *testing.T, s *Redis) {
	t.Helper()
	ctx := context.Background()
	is, err := s.Issue(ctx, 1)
	if err != nil || is.Subject != "First, again" || is.Status != "scheduled" || is.Slug != "first" {
		t.Fatalf("issue 1: %+v %v", is, err)
	}
	if vs, err := s.IssueVersions(ctx, 1); err != nil || len(vs) != 1 || vs[0].Subject != "First" {
		t.Errorf("issue 1's versions: %+v %v", vs, err)
	}
	if bySlug, err := s.IssueBySlug(ctx, "first"); err != nil || bySlug.ID != 1 {
		t.Errorf("issue by slug: %+v %v", bySlug, err)
	}
	if list, err := s.ListIssues(ctx, "", 0, 10); err != nil || len(list) != 2 {
		t.Errorf("issues: %d %v, want 2", len(list), err)
	}
	run, err := s.DigestRun(ctx, "2026-W49")
	if err != nil || run.Issue != 2 || len(run.Items) != 1 {
		t.Errorf("digest run: %+v %v", run, err)
	}
	if p, err := s.LatestDigestPeriod(ctx); err != nil || p != "2026-W49" {
		t.Errorf("latest run %q %v", p, err)
	}
	if items, err := s.ItemsAfter(ctx, "", 0, 10); err != nil || len(items) != 1 || items[0].Title != "An item" {
		t.Errorf("items: %+v %v", items, err)
	}
	if fs, err := s.FeedState(ctx, "digest", "https://example.com/feed.xml"); err != nil || fs.ETag != `"etag1"` {
		t.Errorf("feed state: %+v %v", fs, err)
	}
	if p, err := s.LookupToken(ctx, "hash-of-a-token"); err != nil || p.Name != "ci" {
		t.Errorf("token: %+v %v", p, err)
	}
	if whs, err := s.ListWebhooks(ctx); err != nil || len(whs) != 1 || whs[0].ID != "wh1" {
		t.Errorf("webhooks: %+v %v", whs, err)
	}
	due, err := s.OutboxDue(ctx, time.UnixMilli(1900000000000), 10)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range due {
		ids[e.ID] = true
	}
	for _, want := range []string{"o0", "o1", "o2", "issueplan:1:1"} {
		if !ids[want] {
			t.Errorf("outbox entry %s missing from %v", want, ids)
		}
	}
	if sub, err := s.Get(ctx, "ann@example.com"); err != nil || sub.Status != Active {
		t.Errorf("ann: %+v %v", sub, err)
	}
}

// testdata/v2-people.json is a data set the release before the shards
// (7718591) wrote through its store's methods (README.md): 150 readers
// and people in every state, with consent, topics, push subscriptions,
// delivery marks and claims, outcomes, soft bounces, a reconfirmation, an
// erasure and allowances; v2-people-expected.json is what that store
// answered about them. After start-up moves it into shards, this store
// answers the same, person by person.
type peopleFixture struct {
	Now        time.Time               `json:"now"`
	People     map[string]PersonalData `json:"people"`
	Erased     []string                `json:"erased"`
	List       []int64                 `json:"list"`
	Audience   []int64                 `json:"digest_audience"`
	Suppressed []int64                 `json:"suppressed"`
	Stats      Stats                   `json:"stats"`
	Outbox     []string                `json:"outbox"`
	Marks      []Mark                  `json:"marks"`
	MarksSent  []bool                  `json:"marks_sent"`
}

func TestUpgradeKeepsEveryPerson(t *testing.T) {
	rdb, exp, s := loadPeople(t)
	ctx := context.Background()
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkPeople(t, s, rdb, exp)
	checkLegacyPeople(t, s, exp.People)
}

// An upgrade to layout 4 stopped after some of its steps (a crash) is
// finished by the next start-up, and nobody is lost.
func TestUpgradeKeepsEveryPersonWhenInterrupted(t *testing.T) {
	rdb, exp, s := loadPeople(t)
	ctx := context.Background()
	if _, err := s.upgradeTo3(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	u := &upgrade4{r: s, log: quietLog}
	for _, step := range []func(context.Context) error{u.records, u.bitmaps, u.personal, u.outbox} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkPeople(t, s, rdb, exp)
}

// withoutChannels is what the store answers today about a person the
// fixture's release wrote: that release had no devices, numbers or
// channel choices, and kept no one's clicks, so nobody has any, shown
// empty.
func withoutChannels(want PersonalData) PersonalData {
	if want.Devices == nil {
		want.Devices = []Device{}
	}
	if want.Clicks == nil {
		want.Clicks = []PersonClick{}
	}
	if want.Channels == nil {
		want.Channels = Channels{}
	}
	return want
}

// checkPeople compares what the store answers with what the store before
// the shards answered about the same data.
func checkPeople(t *testing.T, s *Redis, rdb *redis.Client, exp peopleFixture) {
	t.Helper()
	ctx := context.Background()
	for email, want := range exp.People {
		got, err := s.PersonalData(ctx, email)
		if err != nil {
			t.Fatalf("%s: %v", email, err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, withoutChannels(want)); g != w {
			t.Errorf("%s after the upgrade:\n got %s\nwant %s", email, g, w)
		}
	}
	for _, email := range exp.Erased {
		if _, err := s.Get(ctx, email); !errors.Is(err, ErrNotFound) {
			t.Errorf("erased %s: %v, want not found", email, err)
		}
		errs, err := s.SubscribeMany(ctx, []SubscribeRequest{{Email: email, OnlyNew: true, Activate: true}})
		if err != nil || !errors.Is(errs[0], ErrErased) {
			t.Errorf("import of erased %s: %v %v, want ErrErased", email, errs, err)
		}
	}
	var list []int64
	for after := int64(0); ; {
		page, err := s.ListSubscribers(ctx, SubscriberQuery{After: after, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range page.Subscribers {
			list = append(list, sub.ID)
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if !slices.Equal(list, exp.List) {
		t.Errorf("the list: %v\nwant %v", list, exp.List)
	}
	if got, err := s.AudienceAfter(ctx, "digest", 0, 1000); err != nil || !slices.Equal(got, exp.Audience) {
		t.Errorf("the digest's audience: %v %v\nwant %v", got, err, exp.Audience)
	}
	sup, err := s.Suppressed(ctx, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var supIDs []int64
	for _, x := range sup {
		supIDs = append(supIDs, x.ID)
	}
	if !slices.Equal(supIDs, exp.Suppressed) {
		t.Errorf("suppressed: %v, want %v", supIDs, exp.Suppressed)
	}
	if st, err := s.Stats(ctx, 3); err != nil || mustJSON(t, st) != mustJSON(t, exp.Stats) {
		t.Errorf("stats: %s %v\nwant %s", mustJSON(t, st), err, mustJSON(t, exp.Stats))
	}
	due, err := s.OutboxDue(ctx, exp.Now.Add(2*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range due {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, exp.Outbox) {
		t.Errorf("outbox: %v, want %v", ids, exp.Outbox)
	}
	if sent, err := s.SentMarks(ctx, exp.Marks); err != nil || !slices.Equal(sent, exp.MarksSent) {
		t.Errorf("marks sent: %v %v, want %v", sent, err, exp.MarksSent)
	}
	// The claims kept their owner: another run is kept out, the owner
	// takes them over.
	claimed := exp.Marks[len(exp.Marks)-2:]
	if c, err := s.ClaimMarks(ctx, "task-2", claimed, time.Hour); err != nil || c[0] != Busy || c[1] != Busy {
		t.Errorf("claims by another run: %v %v, want held", c, err)
	}
	if c, err := s.ClaimMarks(ctx, "task-1", claimed, time.Hour); err != nil || c[0] != Claimed || c[1] != Claimed {
		t.Errorf("claims by their owner: %v %v, want taken", c, err)
	}
	// The reports already applied stay so: one sent again is a
	// duplicate.
	if res, err := s.RecordFeedback(ctx, Feedback{ID: "s2", Email: "gina@example.com", Type: SoftBounce}, FeedbackPolicy{}); err != nil || !res.Duplicate {
		t.Errorf("a soft bounce report applied before the upgrade, sent again: %+v %v, want a duplicate", res, err)
	}
	// Start-up put everyone in the search index.
	for email := range exp.People {
		page, err := s.Search(ctx, SearchQuery{Q: email, Limit: 1})
		if err != nil || len(page.Subscribers) != 1 || page.Subscribers[0].Email != email {
			t.Errorf("search %s after the upgrade: %v %v", email, page.Subscribers, err)
		}
	}
	for k := range dumpAll(t, rdb) {
		if !strings.Contains(k, "{") && !slices.Contains([]string{keySchema, keySuppFilled, keyTopicsFilled, keyStatusFilled, keySearchFilled, "nl:topics"}, k) {
			t.Errorf("a key of the old layout is left: %s", k)
		}
	}
}

// checkLegacyPeople: the people from before the shards keep their ids,
// whatever shard their address would have now; a lookup, a change, an
// erasure and a signup after it all find them, and new ids are past
// theirs, in the address's home shard.
func checkLegacyPeople(t *testing.T, s *Redis, people map[string]PersonalData) {
	t.Helper()
	ctx := context.Background()
	var away []string
	var maxID int64
	for email, p := range people {
		maxID = max(maxID, p.Subscriber.ID)
		if idShard(p.Subscriber.ID) != homeShard(email) {
			away = append(away, email)
		}
	}
	slices.Sort(away)
	if len(away) < 3 {
		t.Fatalf("only %d people live away from their home shard: the fixture tests too little", len(away))
	}
	moved, left, gone := away[0], away[1], away[2]
	sub, err := s.Unsubscribe(ctx, left)
	if err != nil || sub.ID != people[left].Subscriber.ID || sub.Status != Unsubscribed {
		t.Errorf("unsubscribe %s: %+v %v", left, sub, err)
	}
	again, err := s.Subscribe(ctx, SubscribeRequest{Email: left, Activate: true})
	if err != nil || again.ID != sub.ID || again.Status != Active {
		t.Errorf("back again %s: %+v %v, want id %d active", left, again, err, sub.ID)
	}
	if _, err := s.SetPreferences(ctx, moved, Preferences{Topics: []string{"updates"}, Name: "Moved"}, Cancel{}); err != nil {
		t.Errorf("preferences of %s: %v", moved, err)
	}
	if got, err := s.Get(ctx, moved); err != nil || got.Name != "Moved" || !slices.Equal(got.Topics, []string{"updates"}) {
		t.Errorf("%s after its preferences: %+v %v", moved, got, err)
	}
	if _, err := s.Erase(ctx, gone); err != nil {
		t.Fatalf("erase %s: %v", gone, err)
	}
	if _, err := s.Get(ctx, gone); !errors.Is(err, ErrNotFound) {
		t.Errorf("erased %s: %v, want not found", gone, err)
	}
	errs, err := s.SubscribeMany(ctx, []SubscribeRequest{{Email: gone, OnlyNew: true, Activate: true}})
	if err != nil || !errors.Is(errs[0], ErrErased) {
		t.Errorf("import of erased %s: %v %v, want ErrErased", gone, errs, err)
	}
	back, err := s.Subscribe(ctx, SubscribeRequest{Email: gone, Activate: true})
	if err != nil || back.ID <= maxID || idShard(back.ID) != homeShard(gone) {
		t.Errorf("%s signed up again: %+v %v, want a new id past %d in shard %d", gone, back, err, maxID, homeShard(gone))
	}
	fresh, err := s.Subscribe(ctx, SubscribeRequest{Email: "new@example.net", Activate: true})
	if err != nil || fresh.ID <= maxID || idShard(fresh.ID) != homeShard("new@example.net") {
		t.Errorf("a new subscriber: %+v %v, want an id past %d in its home shard", fresh, err, maxID)
	}
}

// loadPeople loads testdata/v2-people.json into the store's test
// database and answers it, what the release before said about it, and
// the store on it with that release's clock.
func loadPeople(t *testing.T) (*redis.Client, peopleFixture, *Redis) {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBStore)
	loadFixture(t, rdb, "testdata/v2-people.json")
	var exp peopleFixture
	readJSON(t, "testdata/v2-people-expected.json", &exp)
	return rdb, exp, NewRedis(rdb).WithClock(func() time.Time { return exp.Now })
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The people from before the shards, moved into layout 4 on one Redis
// and copied into a real cluster (CopyToCluster), are found and changed
// there as on one Redis: their home shard's pointer sends a script to the
// node of their own shard.
func TestUpgradedPeopleOnCluster(t *testing.T) {
	if os.Getenv(redistest.EnvURL) == "" {
		t.Skip("needs a real Redis to copy from (DUMP and RESTORE): set " + redistest.EnvURL)
	}
	rdb, exp, src := loadPeople(t)
	ctx := context.Background()
	if err := src.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	c := rediscluster.Start(t)
	cl := c.Client(t)
	if _, err := CopyToCluster(ctx, rdb, cl, nil); err != nil {
		t.Fatal(err)
	}
	s := NewRedis(cl).WithClock(func() time.Time { return exp.Now })
	for email, want := range exp.People {
		got, err := s.PersonalData(ctx, email)
		if err != nil {
			t.Fatalf("%s on the cluster: %v", email, err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, withoutChannels(want)); g != w {
			t.Errorf("%s on the cluster:\n got %s\nwant %s", email, g, w)
		}
	}
	checkLegacyPeople(t, s, exp.People)
}
