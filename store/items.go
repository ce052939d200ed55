package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/redis/go-redis/v9"
)

// addItemScript numbers and stores a digest item in one step, so items
// become visible in id order and a run never skips an id that appears
// later.
//
//	KEYS[1]  keyItemSeq   item id counter
//	KEYS[2]  the item's topic's zset of item ids (keyItems for the digest)
//	ARGV[1]  prefixItem
//	ARGV[2]  title
//	ARGV[3]  url
//	ARGV[4]  summary
//	ARGV[5]  published, unix ms
//	ARGV[6]  topic
//
// Writes the item hash: t title, u url, s summary, p published, tp topic.
// Answers the new id.
var addItemScript = redis.NewScript(`
local id = redis.call('INCR', KEYS[1])
redis.call('HSET', ARGV[1] .. id, 't', ARGV[2], 'u', ARGV[3], 's', ARGV[4], 'p', ARGV[5], 'tp', ARGV[6])
redis.call('ZADD', KEYS[2], id, id)
return id
`)

// AddItem implements Digests.
func (r *Redis) AddItem(ctx context.Context, it Item) (Item, error) {
	it.PublishedAt = r.now().UTC().Truncate(time.Millisecond)
	if it.Topic == "" {
		it.Topic = topics.Digest
	}
	id, err := addItemScript.Run(ctx, r.rdb, []string{keyItemSeq, itemsKey(it.Topic)},
		prefixItem, it.Title, it.URL, it.Summary, ms(it.PublishedAt), it.Topic).Int64()
	if err != nil {
		return Item{}, fmt.Errorf("add item: %w", err)
	}
	it.ID = id
	return it, nil
}

// ItemsAfter implements Digests.
func (r *Redis) ItemsAfter(ctx context.Context, topic string, after int64, limit int) ([]Item, error) {
	ids, err := r.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: itemsKey(topic), ByScore: true,
		Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("items of %s: %w", topic, err)
	}
	if len(ids) == 0 {
		return []Item{}, nil
	}
	return r.items(ctx, ids)
}

// Item implements Digests.
func (r *Redis) Item(ctx context.Context, id int64) (Item, error) {
	list, err := r.items(ctx, []string{strconv.FormatInt(id, 10)})
	if err != nil {
		return Item{}, err
	}
	if len(list) == 0 {
		return Item{}, ErrNoItem
	}
	return list[0], nil
}

// updateItemScript replaces an item's text.
//
//	KEYS[1]  the item's hash
//	ARGV[1]  title   ARGV[2]  url   ARGV[3]  summary
//
// Answers 1, or 0 when there is no such item (nothing written).
var updateItemScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'u', ARGV[2], 's', ARGV[3])
return 1
`)

// UpdateItem implements Digests.
func (r *Redis) UpdateItem(ctx context.Context, it Item) (Item, error) {
	key := itemKey(strconv.FormatInt(it.ID, 10))
	n, err := updateItemScript.Run(ctx, r.rdb, []string{key}, it.Title, it.URL, it.Summary).Int()
	if err != nil {
		return Item{}, fmt.Errorf("update item %d: %w", it.ID, err)
	}
	if n == 0 {
		return Item{}, ErrNoItem
	}
	return r.Item(ctx, it.ID)
}

// deleteItemScript removes an item.
//
//	KEYS[1]  the item's hash   KEYS[2]  its topic's zset of item ids
//	ARGV[1]  id
//
// Deletes the hash and the id from the zset (an item's topic never
// changes, so the zset the caller read it from is still its own).
// Answers 1, or 0 when there is no such item.
var deleteItemScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
`)

// DeleteItem implements Digests.
func (r *Redis) DeleteItem(ctx context.Context, id int64) error {
	it, err := r.Item(ctx, id)
	if err != nil {
		return err
	}
	n, err := deleteItemScript.Run(ctx, r.rdb, []string{itemKey(strconv.FormatInt(id, 10)), itemsKey(it.Topic)}, id).Int()
	if err != nil {
		return fmt.Errorf("delete item %d: %w", id, err)
	}
	if n == 0 {
		return ErrNoItem
	}
	return nil
}
