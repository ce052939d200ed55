package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/redis/go-redis/v9"
)

// List is the store's side of owning the list: changing a person by hand,
// searching, and reading a filtered selection page by page (the bulk
// actions and the CSV export).
type List interface {
	// ChangeSubscriber sets what c gives of the person with that
	// address, in one step (the search index follows the name). Topics
	// change only while active or pending (ErrNotActive otherwise);
	// leaving the onboarding sequence's topic drops its outbox entries
	// (c.Cancel). ErrNotFound when unknown.
	ChangeSubscriber(ctx context.Context, email string, c Change) (Subscriber, error)
	// Search finds people by the beginning of their address or name.
	Search(ctx context.Context, q SearchQuery) (SearchPage, error)
	// Select gives a page of the subscribers f selects after cursor ("":
	// from the start), and the cursor of the next ("" when done): the
	// walk of a bulk action or an export, in id order, or in the search
	// index's order when f has Q. limit: 1..MaxSelectPage (a search's
	// pages stop at MaxSubscriberPage).
	Select(ctx context.Context, f Filter, cursor string, limit int) ([]Subscriber, string, error)
	// CountSelection is how many subscribers f selects; -1 when that
	// would take reading them (a search narrowed by status or topic).
	CountSelection(ctx context.Context, f Filter) (int64, error)
	// ConsentsOf gives the consent records of ids, lined up with them
	// (zero for none), in one round trip.
	ConsentsOf(ctx context.Context, ids []int64) ([]Consent, error)
}

// Filter selects part of the list: every condition given must hold.
type Filter struct {
	Status Status `json:"status,omitempty"`
	Topic  string `json:"topic,omitempty"`
	// Q is the beginning of an address or a name (Search).
	Q string `json:"q,omitempty"`
}

// Change is what ChangeSubscriber sets; nil leaves a field as it is.
type Change struct {
	Name, Timezone *string
	// Topics replaces the person's topics (ids the caller checked; at
	// least one: ending a subscription is Unsubscribe's).
	Topics []string
	// Cancel: the sequence's topic and its outbox entries, dropped when
	// Topics leaves it out.
	Cancel outbox.Cancel
}

// changeScript sets a subscriber's name, time zone or topics (an
// admin's change).
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	ARGV[1]  email
//	ARGV[2]  "1": set the name to ARGV[3]
//	ARGV[4]  "1": set the time zone to ARGV[5]
//	ARGV[6]  "1": set the topics to ARGV[7] (comma-separated)
//	ARGV[8]  every topic id, comma-separated
//	ARGV[9]  the sequence's topic
//	ARGV[10…] the sequence's outbox ids
//
// Writes the record (and so the search index), the topics. Answers 'ok',
// 'notactive' (topics of an ended subscription) or 'notfound', then the
// id, the record, the topics and whether it is reconfirming.
var changeScript = subscriberScript(`
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
if ARGV[6] == '1' and r[1] ~= 'a' and r[1] ~= 'p' then
  return {'notactive', id, packrec(r), topicsof(id, ARGV[8]), reconfirming(id, r)}
end
if ARGV[2] == '1' then r[6] = ARGV[3] end
if ARGV[4] == '1' then r[7] = ARGV[5] end
if ARGV[6] == '1' then
  settopics(id, ARGV[8], ARGV[7])
  if not (',' .. ARGV[7] .. ','):find(',' .. ARGV[9] .. ',', 1, true) then
    dropoutbox({unpack(ARGV, 10)})
  end
end
save(id, r)
return {'ok', id, packrec(r), topicsof(id, ARGV[8]), reconfirming(id, r)}
`)

// ChangeSubscriber implements List.
func (r *Redis) ChangeSubscriber(ctx context.Context, email string, c Change) (Subscriber, error) {
	flag := func(p *string) (string, string) {
		if p == nil {
			return "0", ""
		}
		return "1", *p
	}
	setName, name := flag(c.Name)
	setTZ, tz := flag(c.Timezone)
	if err := checkFields(name, tz); err != nil {
		return Subscriber{}, fmt.Errorf("change %s: %w", email, err)
	}
	setTopics := "0"
	if c.Topics != nil {
		if len(c.Topics) == 0 {
			return Subscriber{}, fmt.Errorf("change %s: %w: no topic left (unsubscribe ends a subscription)", email, ErrBadQuery)
		}
		setTopics = "1"
	}
	args := []any{email, setName, name, setTZ, tz, setTopics, strings.Join(c.Topics, ","), r.tl().all, c.Cancel.Topic}
	for _, id := range c.Cancel.Outbox {
		args = append(args, id)
	}
	res, _, err := r.byAddress(ctx, changeScript, email, anchorOnly, args)
	if err != nil {
		return Subscriber{}, fmt.Errorf("change %s: %w", email, err)
	}
	return decodeResult(res)
}

// ConsentsOf implements List.
func (r *Redis) ConsentsOf(ctx context.Context, ids []int64) ([]Consent, error) {
	out := make([]Consent, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, consentKey(id), strconv.FormatInt(id, 10))
		}
		return nil
	})
	if err := pipeErr(nil, err); err != nil {
		return nil, fmt.Errorf("consents of %d subscribers: %w", len(ids), err)
	}
	for i, c := range cmds {
		if v, err := c.Result(); err == nil && v != "" {
			out[i] = decodeConsent(v, Consent{})
		} else if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("consents of %d subscribers: %w", len(ids), err)
		}
	}
	return out, nil
}

// Select implements List: a search page (f.Q) or a page of the id walk,
// with its cursor as a string.
func (r *Redis) Select(ctx context.Context, f Filter, cursor string, limit int) ([]Subscriber, string, error) {
	if f.Q != "" {
		limit = min(limit, MaxSubscriberPage) // a search's page: its merge reads limit from every shard
		page, err := r.search(ctx, SearchQuery{Q: f.Q, Status: f.Status, Topic: f.Topic, After: cursor, Limit: limit}, false)
		return page.Subscribers, page.Next, err
	}
	after := int64(0)
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			return nil, "", fmt.Errorf("%w: cursor %q", ErrBadQuery, cursor)
		}
		after = n
	}
	page, err := r.listPage(ctx, SubscriberQuery{Status: f.Status, Topic: f.Topic, After: after, Limit: limit}, MaxSelectPage, false)
	if err != nil || page.Next == 0 {
		return page.Subscribers, "", err
	}
	return page.Subscribers, strconv.FormatInt(page.Next, 10), nil
}

// CountSelection implements List.
func (r *Redis) CountSelection(ctx context.Context, f Filter) (int64, error) {
	if f.Q != "" {
		if f.Status != "" || f.Topic != "" {
			return -1, nil
		}
		p := searchPrefix(f.Q)
		if p == "" || len(p) > MaxSearchQuery {
			return 0, fmt.Errorf("%w: a search needs 1 to %d characters", ErrBadQuery, MaxSearchQuery)
		}
		return r.searchCount(ctx, p)
	}
	terms, err := r.listTerms(f.Status, f.Topic)
	if err != nil {
		return 0, err
	}
	return r.countTerms(ctx, terms)
}

// ListSubscribers implements People: the shards' status and topic
// bitmaps are walked side by side in id order (walkIDs), so a page of a
// million costs what a page of a thousand does; without a status, the
// walk reads every status's bitmap (a subscriber has exactly one).
func (r *Redis) ListSubscribers(ctx context.Context, q SubscriberQuery) (SubscriberPage, error) {
	return r.listPage(ctx, q, MaxSubscriberPage, true)
}

// MaxSelectPage is the largest page Select gives: a walk of a whole
// selection (an export) takes bigger pages than a screen does, for fewer
// round trips.
const MaxSelectPage = 5000

// listPage is ListSubscribers, with the total counted or not (a walk of
// the whole selection, Select, needs it once, not per page).
func (r *Redis) listPage(ctx context.Context, q SubscriberQuery, maxLimit int, counted bool) (SubscriberPage, error) {
	if q.Limit < 1 || q.Limit > maxLimit || q.After < 0 || q.Before < 0 || (q.After > 0 && q.Before > 0) {
		return SubscriberPage{}, fmt.Errorf("%w: limit %d (want 1..%d), after %d, before %d (not both)", ErrBadQuery, q.Limit, maxLimit, q.After, q.Before)
	}
	terms, err := r.listTerms(q.Status, q.Topic)
	if err != nil {
		return SubscriberPage{}, err
	}
	var ids []int64
	if q.Before > 0 {
		ids, err = r.walkIDsBefore(ctx, terms, q.Before, q.Limit+1)
		slices.Reverse(ids)
	} else {
		ids, err = r.walkIDs(ctx, terms, q.After, q.Limit+1)
	}
	if err != nil {
		return SubscriberPage{}, fmt.Errorf("list subscribers: %w", err)
	}
	// The one id past the page tells whether there is another that way.
	var page SubscriberPage
	extra := len(ids) > q.Limit
	if q.Before > 0 {
		if extra {
			ids = ids[1:]
		}
	} else if extra {
		ids = ids[:q.Limit]
	}
	switch {
	case len(ids) == 0 && q.Before > 0:
		page.Next = q.Before - 1
	case len(ids) == 0 && q.After > 0:
		page.Prev = q.After + 1
	case len(ids) == 0:
	case q.Before > 0:
		page.Next = ids[len(ids)-1]
		if extra {
			page.Prev = ids[0]
		}
	default:
		if q.After > 0 {
			page.Prev = ids[0]
		}
		if extra {
			page.Next = ids[len(ids)-1]
		}
	}
	subs, err := r.SubscribersByID(ctx, ids)
	if err != nil {
		return SubscriberPage{}, fmt.Errorf("list subscribers: %w", err)
	}
	page.Subscribers = make([]Subscriber, 0, len(subs))
	for _, sub := range subs {
		// A bit without its record: erased between the two reads.
		if sub.ID != 0 {
			page.Subscribers = append(page.Subscribers, sub)
		}
	}
	if !counted {
		return page, nil
	}
	if page.Total, err = r.countTerms(ctx, terms); err != nil {
		return SubscriberPage{}, fmt.Errorf("list subscribers: %w", err)
	}
	return page, nil
}

// listTerms are the bitmaps (walkIDs' terms) of the subscribers with
// status st (any: "") and topic (any: "").
func (r *Redis) listTerms(st Status, topic string) ([][]string, error) {
	var terms [][]string
	if st != "" {
		if !st.Valid() {
			return nil, fmt.Errorf("%w: unknown status %q", ErrBadQuery, st)
		}
		terms = append(terms, []string{statusBitmap(st)})
	} else {
		var any []string
		for _, st := range Statuses {
			any = append(any, statusBitmap(st))
		}
		terms = append(terms, any)
	}
	if topic != "" {
		if !slices.Contains(r.tl().ids, topic) {
			return nil, fmt.Errorf("%w: unknown topic %q", ErrBadQuery, topic)
		}
		terms = append(terms, []string{topicSfx(topic)})
	}
	return terms, nil
}
