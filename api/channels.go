package api

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The preference centre's channels: under each topic, the channels the
// person gets it by. E-mail is offered to everyone; push when the service
// sends push (web push, FCM or APNs configured: it reaches the browsers
// and apps they have); SMS only with a number that takes texts (given
// through the product's backend, PUT /api/subscribers/{email}/phone). A
// channel not offered keeps its stored choice on a save. The form posts "channels" values
// "<topic>:<channel>" and channels_shown=1; a form without channels_shown
// (an older page, a script) leaves the choices as they are.

// channelChoice is one channel's checkbox under a topic.
type channelChoice struct {
	Value   string // <topic>:<channel>
	Label   string
	Checked bool
}

// channelLabels are the channels' names on the page.
var channelLabels = map[string]string{store.ChannelEmail: "E-mail", store.ChannelPush: "Notifications", store.ChannelSMS: "Text message"}

// channelsOffer reads what the page offers sub: their choices, and
// whether they have a number that takes texts (and if it said STOP, a
// line saying how to turn texts on again), and their number.
func (s *Server) channelsOffer(ctx context.Context, sub store.Subscriber) (store.Channels, bool, string, store.Phone, error) {
	chans, err := s.deps.Store.ChannelsOf(ctx, []int64{sub.ID})
	if err != nil {
		return nil, false, "", store.Phone{}, err
	}
	phones, err := s.deps.Store.PhonesOf(ctx, []int64{sub.ID})
	if err != nil {
		return nil, false, "", store.Phone{}, err
	}
	p := phones[0]
	note := ""
	if p.Number != "" && p.State == store.NumberStopped {
		note = "Your number " + maskNumber(p.Number) + " replied STOP: text START to it from your phone to get texts again."
	}
	return chans[0], p.Number != "" && p.State == store.NumberOn, note, p, nil
}

// maskNumber shows a number's last three digits only.
func maskNumber(n string) string {
	if len(n) <= 3 {
		return n
	}
	return strings.Repeat("•", 4) + n[len(n)-3:]
}

// offered tells whether the preference centre offers channel c to a
// person (sms: whether they have a number that takes texts).
func (s *Server) offered(c string, sms bool) bool {
	switch c {
	case store.ChannelPush:
		return s.pushOn() || s.cfg.AppPush
	case store.ChannelSMS:
		return sms
	}
	return true // e-mail, and the channels added through the seam
}

// choosable are the channels a person may choose, in the order pages
// show them: the built-in ones (store.AllChannels), then those added
// through the seam (tasks.AddedChannels).
func choosable() []string {
	out := slices.Clone(store.AllChannels)
	for _, c := range tasks.AddedChannels() {
		out = append(out, c.Name)
	}
	return out
}

// channelLabel is how the page names channel c.
func channelLabel(c string) string {
	if l, ok := channelLabels[c]; ok {
		return l
	}
	for _, a := range tasks.AddedChannels() {
		if a.Name == c {
			return a.Label
		}
	}
	return c
}

// wants tells whether chans get topic by channel c, an added channel on
// by default if it says so.
func wants(chans store.Channels, topic, c string) bool {
	for _, a := range tasks.AddedChannels() {
		if a.Name == c {
			return chans.WantsOr(topic, c, a.DefaultOn)
		}
	}
	return chans.Wants(topic, c)
}

// withChannels adds each topic's channel checkboxes to the page's topics.
func (s *Server) withChannels(topics []topicChoice, chans store.Channels, sms bool) []topicChoice {
	for i := range topics {
		for _, c := range choosable() {
			if !s.offered(c, sms) {
				continue
			}
			id := topics[i].ID
			topics[i].Channels = append(topics[i].Channels, channelChoice{Value: id + ":" + c, Label: channelLabel(c), Checked: wants(chans, id, c)})
		}
	}
	return topics
}

// chosenChannels reads the form's "channels" values into each known
// topic's channels (a topic with none ticked: none). A value that is not
// "<topic>:<channel>" of a known topic and channel is an error.
func (s *Server) chosenChannels(values []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, t := range s.cfg.Topics.Current().Topics {
		out[t.ID] = []string{}
	}
	for _, v := range values {
		topic, channel, ok := strings.Cut(v, ":")
		if _, known := out[topic]; !ok || !known || !slices.Contains(choosable(), channel) {
			return nil, fmt.Errorf("unknown channel choice %q", v)
		}
		if !slices.Contains(out[topic], channel) {
			out[topic] = append(out[topic], channel)
		}
	}
	return out, nil
}

// saveChannels stores the topics' channels that changed. A channel the
// page did not offer (SMS for a person without a number that takes
// texts, push on a service that sends none) is kept as it was, whatever
// was posted for it.
func (s *Server) saveChannels(ctx context.Context, sub store.Subscriber, chosen map[string][]string) error {
	before, sms, _, _, err := s.channelsOffer(ctx, sub)
	if err != nil {
		return err
	}
	for _, t := range s.cfg.Topics.Current().Topics {
		var want []string
		for _, c := range choosable() {
			if s.offered(c, sms) && slices.Contains(chosen[t.ID], c) || !s.offered(c, sms) && wants(before, t.ID, c) {
				want = append(want, c)
			}
		}
		same := true
		for _, c := range choosable() {
			same = same && wants(before, t.ID, c) == slices.Contains(want, c)
		}
		if same {
			continue
		}
		if err := s.deps.Store.SetChannels(ctx, sub.ID, t.ID, want); err != nil {
			return err
		}
	}
	return nil
}
