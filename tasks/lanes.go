package tasks

import (
	"fmt"
	"slices"
	"strings"
)

// Lanes. A lane is a channel's own way out: its queues, its own pool of
// workers (tasks/worker runs one asynq server per lane), its own shared
// rate limit and its own scaling signal, so a slow push service backs up
// the push lane only and never takes a worker e-mail needs.
const (
	LaneEmail   = "email"
	LanePush    = "push"
	LaneWebhook = "webhook"
	LaneSMS     = "sms"
)

// The queues of the push and webhook lanes, and the e-mail lane's lowest
// priority (bulk that may wait behind everything else).
const (
	QueueLow     = "low"
	QueuePush    = "push"
	QueueWebhook = "webhook"
	QueueSMS     = "sms"
)

// Lanes lists every lane, in the order they are documented and started.
var Lanes = []string{LaneEmail, LanePush, LaneWebhook, LaneSMS}

// LaneQueues is each lane's asynq Queues map: which queues its pool serves
// and with what weight. A queue belongs to exactly one lane.
var LaneQueues = map[string]map[string]int{
	LaneEmail:   QueueWeights,
	LanePush:    {QueuePush: 1},
	LaneWebhook: {QueueWebhook: 1},
	LaneSMS:     {QueueSMS: 1},
}

// laneOf is LaneQueues inverted.
var laneOf = func() map[string]string {
	m := map[string]string{}
	for lane, qs := range LaneQueues {
		for q := range qs {
			m[q] = lane
		}
	}
	return m
}()

// LaneOf is the lane whose pool serves queue ("" for an unknown queue).
func LaneOf(queue string) string { return laneOf[queue] }

// QueuesOf lists the queues of lane, highest weight first (nil for an
// unknown lane).
func QueuesOf(lane string) []string {
	var qs []string
	for _, q := range Queues {
		if laneOf[q] == lane {
			qs = append(qs, q)
		}
	}
	return qs
}

// ParseLanes reads a comma-separated list of lanes (NEWSLETTER_LANES,
// `newsletter worker --lanes`): each known, none twice, at least one.
func ParseLanes(s string) ([]string, error) {
	var lanes []string
	for l := range strings.SplitSeq(s, ",") {
		l = strings.ToLower(strings.TrimSpace(l))
		if l == "" {
			continue
		}
		if !slices.Contains(Lanes, l) {
			return nil, fmt.Errorf("unknown lane %q: want a comma-separated list of %s", l, strings.Join(Lanes, ", "))
		}
		if slices.Contains(lanes, l) {
			return nil, fmt.Errorf("lane %q named twice", l)
		}
		lanes = append(lanes, l)
	}
	if len(lanes) == 0 {
		return nil, fmt.Errorf("no lane: want a comma-separated list of %s", strings.Join(Lanes, ", "))
	}
	return lanes, nil
}
