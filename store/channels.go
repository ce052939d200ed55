package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The channels a person may get a topic by.
const (
	ChannelEmail = "email"
	ChannelPush  = "push" // browsers and app installs
	ChannelSMS   = "sms"
)

// AllChannels lists the channels in the order pages show them.
var AllChannels = []string{ChannelEmail, ChannelPush, ChannelSMS}

// DefaultChannels are a topic's channels until the person chooses: e-mail
// and push; SMS is off until they turn it on (it costs, and it reaches a
// phone).
var DefaultChannels = []string{ChannelEmail, ChannelPush}

// Channels are the person's choices, by topic: a topic they did not
// choose for has DefaultChannels.
type Channels map[string][]string

// Wants tells whether the person gets topic by channel.
func (c Channels) Wants(topic, channel string) bool {
	return c.WantsOr(topic, channel, slices.Contains(DefaultChannels, channel))
}

// WantsOr tells whether the person gets topic by channel, a channel on by
// default when onByDefault (a channel added through the seam says so of
// itself: tasks.ChannelInfo).
func (c Channels) WantsOr(topic, channel string, onByDefault bool) bool {
	chosen, ok := c[topic]
	if !ok {
		return onByDefault
	}
	return slices.Contains(chosen, channel)
}

// ChannelChoices are the people's choices of channel per topic.
type ChannelChoices interface {
	// SetChannels records that subscriber id gets topic by channels
	// (each one of AllChannels; none: the topic by no channel, while
	// it stays on). No such id: ErrNotFound.
	SetChannels(ctx context.Context, id int64, topic string, channels []string) error
	// ChannelsOf reads the choices of many people, lined up with ids:
	// one read of each shard's stretch of those who ever chose, and
	// their choices alone.
	ChannelsOf(ctx context.Context, ids []int64) ([]Channels, error)
}

// setChannelsScript records a choice of channels for one topic.
//
//	KEYS[1]  the id's shard's anchor
//	KEYS[2]  the subscriber's choices (channelsKey)
//	ARGV[1]  id
//	ARGV[2]  topic
//	ARGV[3]  the channels, comma-separated
//
// Sets the subscriber's bit in the shard's chosen bitmap (sfxChose).
// Answers 'ok' or 'notfound'.
var setChannelsScript = subscriberScript(`
local id = ARGV[1]
if redis.call('HEXISTS', subkey(id), id) == 0 then return 'notfound' end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('SETBIT', CHOSE, slot(id), 1)
return 'ok'
`)

// SetChannels implements ChannelChoices.
func (r *Redis) SetChannels(ctx context.Context, id int64, topic string, channels []string) error {
	for _, c := range channels {
		if !slices.Contains(AllChannels, c) && !slices.Contains(r.added, c) {
			return fmt.Errorf("channels of %d: no channel %q", id, c)
		}
	}
	if topic == "" || strings.Contains(topic, ",") {
		return fmt.Errorf("channels of %d: no topic %q", id, topic)
	}
	// The built-in channels in their order, then the added ones in theirs.
	ordered := slices.DeleteFunc(append(slices.Clone(AllChannels), r.added...), func(c string) bool { return !slices.Contains(channels, c) })
	res, err := setChannelsScript.Run(ctx, r.rdb, []string{anchor(idShard(id)), channelsKey(id)}, id, topic, strings.Join(ordered, ",")).Text()
	if err != nil {
		return fmt.Errorf("store the channels of %d: %w", id, err)
	}
	if res == "notfound" {
		return ErrNotFound
	}
	return nil
}

// ChannelsOf implements ChannelChoices.
func (r *Redis) ChannelsOf(ctx context.Context, ids []int64) ([]Channels, error) {
	out := make([]Channels, len(ids))
	type stretch struct{ lo, hi int64 }
	stretches := map[shard]*stretch{}
	for _, id := range ids {
		if id <= 0 {
			continue
		}
		s, at := idShard(id), idSlot(id)/8
		if st, ok := stretches[s]; !ok {
			stretches[s] = &stretch{at, at}
		} else {
			st.lo, st.hi = min(st.lo, at), max(st.hi, at)
		}
	}
	bits := map[shard]*redis.StringCmd{}
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, st := range stretches {
			bits[s] = p.GetRange(ctx, s.key(sfxChose), st.lo, st.hi)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read who chose channels: %w", err)
	}
	reads := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			if id <= 0 {
				continue
			}
			s := idShard(id)
			if bitAt(bits[s].Val(), idSlot(id)-stretches[s].lo*8) {
				reads[i] = p.HGetAll(ctx, channelsKey(id))
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the channels chosen: %w", err)
	}
	for i, c := range reads {
		if c == nil {
			continue
		}
		out[i] = Channels{}
		for topic, list := range c.Val() {
			out[i][topic] = []string{}
			if list != "" {
				out[i][topic] = strings.Split(list, ",")
			}
		}
	}
	return out, nil
}
