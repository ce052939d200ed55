package tasks

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pagers numbers the channels TestAddChannel adds.
var pagers atomic.Int32

// TestAddChannel: an added channel gets a lane, a queue and a task type
// of its name, its tasks carry their id and queue, and a name that is not
// a channel's or is taken is refused.
func TestAddChannel(t *testing.T) {
	// A name of its own on each run: the registry is the process's, and
	// -count runs the test again in it.
	pager := fmt.Sprintf("pager%d", pagers.Add(1))
	k, err := AddChannel(ChannelInfo{Name: pager, DefaultOn: true})
	if err != nil {
		t.Fatal(err)
	}
	if k.Type != pager+":deliver" || QueueOf(k.Type) != pager || LaneOf(pager) != pager || LaneQueues[pager][pager] != 1 {
		t.Fatalf("kind %+v, queue %q, lane %q", k, QueueOf(k.Type), LaneOf(pager))
	}
	if lanes, err := ParseLanes("email," + pager); err != nil || len(lanes) != 2 {
		t.Fatalf("NEWSLETTER_LANES with the added lane: %v %v", lanes, err)
	}
	added := AddedChannels()
	if got := added[len(added)-1]; got.Name != pager || got.Label != pager || !got.DefaultOn {
		t.Fatalf("added %+v, want %s labelled by its name", got, pager)
	}
	task := NewDeliver(DeliverPayload{Channel: pager, Key: "ev:1", SubscriberID: 7, Title: "t", At: time.Now()})
	if task == nil || task.Type() != pager+":deliver" {
		t.Fatalf("task %v", task)
	}
	if NewDeliver(DeliverPayload{Channel: "nope", Key: "ev:1", SubscriberID: 7, Title: "t"}) != nil {
		t.Fatal("a task of a channel never added")
	}
	if _, err := k.Decode([]byte(`{"channel":"other","key":"ev:1","subscriber_id":7,"title":"t"}`)); err == nil {
		t.Fatal("a payload of another channel passed the kind's check")
	}
	for _, name := range []string{"email", "push", "low", pager, "Bad", "x", "a-b", strings.Repeat("a", 25)} {
		if _, err := AddChannel(ChannelInfo{Name: name}); err == nil {
			t.Errorf("channel %q was added", name)
		}
	}
}
