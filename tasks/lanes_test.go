package tasks

import (
	"slices"
	"strings"
	"testing"
)

// TestLaneQueues: every queue belongs to exactly one lane, and every lane
// and task type has a queue of a lane.
func TestLaneQueues(t *testing.T) {
	seen := map[string]string{}
	for _, lane := range Lanes {
		qs := LaneQueues[lane]
		if len(qs) == 0 {
			t.Errorf("lane %s has no queue", lane)
		}
		for q := range qs {
			if other, ok := seen[q]; ok {
				t.Errorf("queue %s is in lanes %s and %s", q, other, lane)
			}
			seen[q] = lane
			if LaneOf(q) != lane || !slices.Contains(QueuesOf(lane), q) || !slices.Contains(Queues, q) {
				t.Errorf("queue %s: LaneOf %q, QueuesOf(%s) %v, Queues %v", q, LaneOf(q), lane, QueuesOf(lane), Queues)
			}
		}
	}
	if len(seen) != len(Queues) {
		t.Errorf("Queues %v, lanes' queues %v", Queues, seen)
	}
	for typ, k := range kinds {
		if q := k.queue; LaneOf(q) == "" {
			t.Errorf("%s runs in %s, which no lane serves", typ, k.queue)
		}
	}
	if got := QueuesOf(LaneEmail); !slices.Equal(got, []string{QueueTransactional, QueueCritical, QueueDefault, QueueLow}) {
		t.Errorf("e-mail lane's queues %v", got)
	}
}

func TestParseLanes(t *testing.T) {
	for in, want := range map[string][]string{
		"email,push,webhook": {"email", "push", "webhook"},
		" Push , email ":     {"push", "email"},
		"webhook,":           {"webhook"},
		"sms,email":          {"sms", "email"},
	} {
		got, err := ParseLanes(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseLanes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{"fax": `unknown lane "fax"`, "email,email": "twice", "": "no lane", " , ": "no lane"} {
		if _, err := ParseLanes(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseLanes(%q): %v, want an error saying %q", in, err, msg)
		}
	}
}
