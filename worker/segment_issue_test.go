package worker

import (
	"context"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// listUnsubscribeToken finds the token of a List-Unsubscribe header.
var listUnsubscribeToken = regexp.MustCompile(`/unsubscribe\?token=([^>]+)>`)

// An issue to a segment alone goes to exactly the segment's active
// people, each once, as a brute-force evaluation over the test's own copy
// of a few hundred generated people says (random topics, tags, field
// values, some unsubscribed): planned shard by shard, in batches.
func TestIssueToSegmentReachesExactlyItsPeople(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	if _, err := d.store.DefineField(ctx, store.FieldDef{Name: "seats", Type: store.FieldNumber}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	emails := seed(t, d.store, "s", 400, func(r *store.SubscribeRequest) {
		r.Topics = [][]string{{topics.Digest}, {topics.Updates}, {topics.Digest, topics.Updates}}[rng.IntN(3)]
	})
	var want []string
	for _, e := range emails {
		sub, err := d.store.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		var tags []string
		for _, tg := range []string{"beta", "paid"} {
			if rng.IntN(2) == 0 {
				tags = append(tags, tg)
			}
		}
		if _, err := d.store.AddTags(ctx, sub.ID, tags); err != nil {
			t.Fatal(err)
		}
		seats := rng.IntN(10)
		if _, err := d.store.SetFields(ctx, sub.ID, map[string]string{"seats": strconv.Itoa(seats)}); err != nil {
			t.Fatal(err)
		}
		left := rng.IntN(10) == 0
		if left {
			if _, err := d.store.Unsubscribe(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		// The brute force: topic:updates AND tag:beta AND NOT tag:paid AND field.seats >= 3, active.
		if !left && slices.Contains(sub.Topics, topics.Updates) && slices.Contains(tags, "beta") && !slices.Contains(tags, "paid") && seats >= 3 {
			want = append(want, e)
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d people in the segment: the test proves little", len(want))
	}
	seg, err := d.store.CreateSegment(ctx, "Beta, unpaid, 3 seats", "topic:updates AND tag:beta AND NOT tag:paid AND field.seats >= 3")
	if err != nil {
		t.Fatal(err)
	}
	d.startWorker(t, 100000, 8)
	is := d.sendIssue(t, store.IssueContent{Subject: "For our beta testers", Body: "Hello.", Segment: seg.ID})
	p := d.waitIssueSent(t, is.ID)
	d.exactlyOnce(t, want)
	if got := len(d.smtp.Messages()); got != len(want) {
		var to []string
		for _, m := range d.smtp.Messages() {
			to = append(to, m.To...)
		}
		t.Fatalf("%d mails, want %d (the segment's); sent to %s", got, len(want), strings.Join(to, " "))
	}
	if p.Planned != int64(len(want)) || p.Sent != int64(len(want)) {
		t.Fatalf("progress %+v, want %d planned and sent", p, len(want))
	}
	// The readers got it for being in the segment, not for a topic: the
	// footer names no topic, and List-Unsubscribe (and the footer's
	// link) leave the newsletter's bulk mail, not one of their topics.
	m := d.smtp.To(want[0])[0]
	u := listUnsubscribeToken.FindStringSubmatch(m.Header.Get("List-Unsubscribe"))
	if u == nil {
		t.Fatalf("a segment's mail has no List-Unsubscribe:\n%s", m.Data)
	}
	tok, _ := url.QueryUnescape(u[1])
	who, err := newHandlersLinks().Signer.Verify(token.Unsubscribe, tok)
	if err != nil || who.Topic != "" || who.Issue != is.ID {
		t.Fatalf("the segment issue's List-Unsubscribe leaves %+v (%v), want everything, counted for issue %d", who, err, is.ID)
	}
	if text := m.Text(); !strings.Contains(text, "You receive this mail because") || strings.Contains(text, "Weekly digest") || strings.Contains(text, "Product updates") {
		t.Fatalf("the segment issue's footer names a topic:\n%s", text)
	}
	if strings.Contains(m.Text(), "/archive/") {
		t.Fatalf("a segment's issue links to the public archive:\n%s", m.Text())
	}
}
