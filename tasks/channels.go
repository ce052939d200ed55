package tasks

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// A channel added through the seam (channels.Plugin, registered in
// cmd/newsletter/channels.go) gets, by its name alone, what the built-in
// channels have by hand: a lane and a queue of that name, and one task
// type, "<name>:deliver", whose handler is the worker's one generic lane
// (worker.ChannelLane). AddChannel makes them; it runs before the worker
// or the API starts, once per channel.

// DeliverPayload is the payload of a channel's "<name>:deliver": one
// event for one person, sent to each of their addresses on the channel.
type DeliverPayload struct {
	// Channel is the channel's name (its lane, its queue, its marks' kind).
	Channel string `json:"channel"`
	// Key is the fan-out's (FanoutPayload.Key): with the subscriber, the
	// task's id and the delivery marks'.
	Key          string   `json:"key"`
	SubscriberID int64    `json:"subscriber_id"`
	Topics       []string `json:"topics"`
	Title        string   `json:"title"`
	Body         string   `json:"body,omitempty"`
	URL          string   `json:"url,omitempty"`
	// At is when the event was posted: the person's messages on the
	// channel go in that order (store.PersonOrder).
	At time.Time `json:"at,omitzero"`
}

// channelName is what a channel may be called: a lane, a queue, a task
// type's prefix, a metric label and a word in a stored list of channels.
var channelName = regexp.MustCompile(`^[a-z][a-z0-9_]{1,23}$`)

// ChannelInfo is what the task vocabulary, the fan-out and the
// preference centre know of a channel added through the seam.
type ChannelInfo struct {
	Name  string
	Label string // how the preference centre names it
	// DefaultOn: among a topic's channels until the person chooses.
	DefaultOn bool
}

var (
	addedMu  sync.RWMutex
	added    []ChannelInfo
	delivers = map[string]Kind[DeliverPayload]{}
)

// AddChannel makes the lane, the queue and the "<name>:deliver" kind of
// a channel added through the seam, and answers the kind. A name that is
// not a channel's, or is a lane's or a queue's already, is an error. It
// runs before anything reads the lanes (the binary registers its
// channels first thing): the tables it extends are read without a lock.
func AddChannel(c ChannelInfo) (Kind[DeliverPayload], error) {
	addedMu.Lock()
	defer addedMu.Unlock()
	name := c.Name
	if !channelName.MatchString(name) {
		return Kind[DeliverPayload]{}, fmt.Errorf("channel %q: want 2-24 of a-z, 0-9 and _, a letter first", name)
	}
	if slices.Contains(Lanes, name) || slices.Contains(Queues, name) {
		return Kind[DeliverPayload]{}, fmt.Errorf("channel %q: a lane or a queue has that name", name)
	}
	k := define(Kind[DeliverPayload]{
		Type: name + ":deliver", Queue: name, MaxRetry: 20, Timeout: pushTimeout,
		ID: func(p DeliverPayload) string { return fmt.Sprintf("%s:%s:%d", p.Channel, p.Key, p.SubscriberID) },
		Check: func(p DeliverPayload) error {
			return need(p.Channel == name && p.Key != "" && p.SubscriberID > 0 && p.Title != "", "channel, key, subscriber and title")
		},
	})
	Lanes = append(Lanes, name)
	Queues = append(Queues, name)
	LaneQueues[name] = map[string]int{name: 1}
	laneOf[name] = name
	if c.Label == "" {
		c.Label = name
	}
	added = append(added, c)
	delivers[name] = k
	return k, nil
}

// AddedChannels are the channels added through the seam, in the order
// they were added.
func AddedChannels() []ChannelInfo {
	addedMu.RLock()
	defer addedMu.RUnlock()
	return slices.Clone(added)
}

// DeliverKind is the "<name>:deliver" kind of an added channel (false:
// no such channel).
func DeliverKind(name string) (Kind[DeliverPayload], bool) {
	addedMu.RLock()
	defer addedMu.RUnlock()
	k, ok := delivers[name]
	return k, ok
}

// NewDeliver is p's task, of its channel's kind. No such channel: nil.
func NewDeliver(p DeliverPayload) *asynq.Task {
	k, ok := DeliverKind(p.Channel)
	if !ok {
		return nil
	}
	return k.New(p)
}
