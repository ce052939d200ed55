package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A person's inbox is six keys under one {tag}, so every script below
// touches one slot of a cluster:
//
//	ch:inbox:{<id>}:m    hash: message id → the message as stored JSON
//	ch:inbox:{<id>}:o    sorted set: message ids by their order (n)
//	ch:inbox:{<id>}:u    set: the ids unread and not archived (the count)
//	ch:inbox:{<id>}:n    counter: the last order given
//	ch:inbox:{<id>}:log  stream: what changed (a message's id, or the
//	                     count), the ids a reader's event stream resumes
//	                     from (Last-Event-ID); the message itself is read
//	                     from the hash, so the log costs an id an entry
//	ch:inbox:{<id>}:cut  the newest log id trimmed away: a reader behind
//	                     it missed something and refetches
//
// Every write sets the keys to expire after the days kept, so an inbox
// nobody writes to is gone when its newest message is.
type keys [6]string

func personKeys(id int64) keys {
	p := "ch:inbox:{" + strconv.FormatInt(id, 10) + "}:"
	return keys{p + "m", p + "o", p + "u", p + "n", p + "log", p + "cut"}
}

// stored is a message as the hash keeps it: Message and when it was
// written in Unix milliseconds, which the scripts read to age it out.
type stored struct {
	Message
	MS int64 `json:"ms"`
}

// Message is one message of a reader's inbox, as the reader API answers
// it.
type Message struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Body     string    `json:"body"` // sanitised HTML, rendered from the event's Markdown
	URL      string    `json:"url,omitempty"`
	Topic    string    `json:"topic,omitempty"`
	Created  time.Time `json:"created"`
	Seen     bool      `json:"seen"`
	Read     bool      `json:"read"`
	Archived bool      `json:"archived"`
}

// logLua appends one entry to the log (KEYS[5]) and trims it to
// ARGV[cap] entries, noting the newest id trimmed in KEYS[6]. It is the
// head of the scripts that change an inbox.
const logLua = `
local function log(cap, kind, data)
  local id = redis.call('XADD', KEYS[5], '*', 'k', kind, 'd', data)
  local len = redis.call('XLEN', KEYS[5])
  if len > cap then
    local old = redis.call('XRANGE', KEYS[5], '-', '+', 'COUNT', len - cap)
    redis.call('XTRIM', KEYS[5], 'MAXLEN', cap)
    redis.call('SET', KEYS[6], old[#old][1])
  end
  return id
end
local function count()
  return '{"unread":' .. redis.call('SCARD', KEYS[3]) .. '}'
end
local function expire(ttl)
  for i = 1, 6 do redis.call('EXPIRE', KEYS[i], ttl) end
end
`

// addScript writes one message, once: a retried delivery finds its id
// and changes nothing. Past keep messages, or older than the cutoff, the
// oldest go.
//
//	KEYS[1..6] personKeys
//	ARGV[1] message id    ARGV[2] stored JSON   ARGV[3] keep
//	ARGV[4] cutoff (ms)   ARGV[5] ttl (s)       ARGV[6] log cap
//
// Returns 1 when written, 0 when it was there already.
var addScript = redis.NewScript(logLua + `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local cap = tonumber(ARGV[6])
local seq = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
local keep, cutoff = tonumber(ARGV[3]), tonumber(ARGV[4])
while redis.call('ZCARD', KEYS[2]) > keep do
  local old = redis.call('ZPOPMIN', KEYS[2])
  redis.call('HDEL', KEYS[1], old[1])
  redis.call('SREM', KEYS[3], old[1])
end
for _ = 1, 16 do
  local old = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #old == 0 then break end
  local raw = redis.call('HGET', KEYS[1], old[1])
  if raw and cjson.decode(raw).ms >= cutoff then break end
  redis.call('ZREM', KEYS[2], old[1])
  redis.call('HDEL', KEYS[1], old[1])
  redis.call('SREM', KEYS[3], old[1])
end
log(cap, 'message', ARGV[1])
log(cap, 'count', count())
expire(tonumber(ARGV[5]))
return 1
`)

// listScript answers a page of messages, newest first, from before the
// cursor; it marks what it answers seen.
//
//	KEYS[1..3] personKeys (m, o, u)
//	ARGV[1] the bound ("+inf", or "(" .. order)   ARGV[2] page size
//	ARGV[3] "1" for the archived, "0" for the rest  ARGV[4] cutoff (ms)
//
// Returns {messages, next order or "", unread}.
var listScript = redis.NewScript(`
local limit, archived, cutoff = tonumber(ARGV[2]), ARGV[3] == '1', tonumber(ARGV[4])
local out, bound, next, scanned = {}, ARGV[1], '', 0
while #out < limit and scanned < 1000 do
  local page = redis.call('ZREVRANGEBYSCORE', KEYS[2], bound, '-inf', 'WITHSCORES', 'LIMIT', 0, limit)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    scanned = scanned + 1
    bound = '(' .. page[i + 1]
    local raw = redis.call('HGET', KEYS[1], page[i])
    if raw then
      local m = cjson.decode(raw)
      if (m.archived == true) == archived and m.ms >= cutoff then
        if not m.seen then
          m.seen = true
          raw = cjson.encode(m)
          redis.call('HSET', KEYS[1], page[i], raw)
        end
        out[#out + 1] = raw
        if #out == limit then next = page[i + 1]; break end
      end
    end
  end
end
return {out, next, redis.call('SCARD', KEYS[3])}
`)

// markScript moves one message's state: "read", "unread" or "archive".
//
//	KEYS[1..6] personKeys   ARGV[1] message id   ARGV[2] what
//	ARGV[3] log cap
//
// Returns false for no such message, else {the message, unread}.
var markScript = redis.NewScript(logLua + `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return false end
local m = cjson.decode(raw)
local changed = false
if ARGV[2] == 'read' then
  changed = m.read ~= true
  m.read, m.seen = true, true
elseif ARGV[2] == 'unread' then
  changed = m.read == true
  m.read = false
else
  changed = m.archived ~= true
  m.archived, m.seen = true, true
end
if changed then
  raw = cjson.encode(m)
  redis.call('HSET', KEYS[1], ARGV[1], raw)
  if m.read or m.archived then
    redis.call('SREM', KEYS[3], ARGV[1])
  else
    redis.call('SADD', KEYS[3], ARGV[1])
  end
  local cap = tonumber(ARGV[3])
  log(cap, 'update', ARGV[1])
  log(cap, 'count', count())
end
return {raw, redis.call('SCARD', KEYS[3])}
`)

// readAllScript marks every unread message read.
//
//	KEYS[1..6] personKeys   ARGV[1] log cap
//
// Returns how many it marked.
var readAllScript = redis.NewScript(logLua + `
local cap = tonumber(ARGV[1])
local ids = redis.call('SMEMBERS', KEYS[3])
for _, id in ipairs(ids) do
  local raw = redis.call('HGET', KEYS[1], id)
  if raw then
    local m = cjson.decode(raw)
    m.read, m.seen = true, true
    raw = cjson.encode(m)
    redis.call('HSET', KEYS[1], id, raw)
    log(cap, 'update', id)
  end
end
redis.call('DEL', KEYS[3])
if #ids > 0 then log(cap, 'count', count()) end
return #ids
`)

// store is the inbox's Redis side.
type store struct {
	rdb     redis.UniversalClient
	keep    int
	keepFor time.Duration
	now     func() time.Time
}

// logCap is how many changes a person's log keeps: a read-all of a full
// inbox and its count fit, with room for a reader a little behind.
func (s *store) logCap() int { return 2*s.keep + 100 }

func (s *store) cutoff() int64 { return s.now().Add(-s.keepFor).UnixMilli() }

// addArgs are addScript's keys and arguments for writing m to person
// id's inbox.
func (s *store) addArgs(id int64, m Message) ([]string, []any, error) {
	raw, err := json.Marshal(stored{Message: m, MS: m.Created.UnixMilli()})
	if err != nil {
		return nil, nil, err
	}
	k := personKeys(id)
	return k[:], []any{m.ID, raw, s.keep, s.cutoff(), int64(s.keepFor/time.Second) + 1, s.logCap()}, nil
}

// addCmd queues the writing of m to person id's inbox on pipe, by the
// script's hash: a pipeline cannot fall back to the script's text, so
// Send runs what answered NOSCRIPT again (addAgain).
func (s *store) addCmd(ctx context.Context, pipe redis.Pipeliner, id int64, m Message) (*redis.Cmd, error) {
	k, args, err := s.addArgs(id, m)
	if err != nil {
		return nil, err
	}
	return addScript.EvalSha(ctx, pipe, k, args...), nil
}

// addAgain writes m to person id's inbox after its pipelined EVALSHA
// answered NOSCRIPT (Redis restarted, or a new shard): Run loads the
// script. The script writes a message once, so running it again is safe.
func (s *store) addAgain(ctx context.Context, id int64, m Message) error {
	k, args, err := s.addArgs(id, m)
	if err != nil {
		return err
	}
	return addScript.Run(ctx, s.rdb, k, args...).Err()
}

// page is one page of a list.
type page struct {
	Messages []Message
	Next     string
	Unread   int64
}

// list answers the page of person id's messages before cursor ("" for
// the newest).
func (s *store) list(ctx context.Context, id int64, cursor string, limit int, archived bool) (page, error) {
	bound := "+inf"
	if cursor != "" {
		bound = "(" + cursor
	}
	flag := "0"
	if archived {
		flag = "1"
	}
	k := personKeys(id)
	res, err := listScript.Run(ctx, s.rdb, k[:3], bound, limit, flag, s.cutoff()).Slice()
	if err != nil {
		return page{}, err
	}
	if len(res) != 3 {
		return page{}, fmt.Errorf("inbox: list answered %d values", len(res))
	}
	raws, _ := res[0].([]any)
	var p page
	for _, r := range raws {
		m, err := decode(r)
		if err != nil {
			return page{}, err
		}
		p.Messages = append(p.Messages, m)
	}
	p.Next, _ = res[1].(string)
	p.Unread, _ = res[2].(int64)
	return p, nil
}

// decode reads a stored message as Redis answered it.
func decode(r any) (Message, error) {
	s, ok := r.(string)
	if !ok {
		return Message{}, fmt.Errorf("inbox: a stored message is %T", r)
	}
	var st stored
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return Message{}, fmt.Errorf("inbox: a stored message: %w", err)
	}
	return st.Message, nil
}

// errNoMessage: no such message in the person's inbox.
var errNoMessage = errors.New("no such message")

// mark moves one message's state (what: read, unread, archive).
func (s *store) mark(ctx context.Context, id int64, msgID, what string) (Message, int64, error) {
	k := personKeys(id)
	res, err := markScript.Run(ctx, s.rdb, k[:], msgID, what, s.logCap()).Slice()
	if errors.Is(err, redis.Nil) {
		return Message{}, 0, errNoMessage
	}
	if err != nil {
		return Message{}, 0, err
	}
	if len(res) != 2 {
		return Message{}, 0, fmt.Errorf("inbox: mark answered %d values", len(res))
	}
	m, err := decode(res[0])
	unread, _ := res[1].(int64)
	return m, unread, err
}

// readAll marks all of person id's messages read.
func (s *store) readAll(ctx context.Context, id int64) (int64, error) {
	k := personKeys(id)
	return readAllScript.Run(ctx, s.rdb, k[:], s.logCap()).Int64()
}

// unread is person id's unread count.
func (s *store) unread(ctx context.Context, id int64) (int64, error) {
	return s.rdb.SCard(ctx, personKeys(id)[2]).Result()
}

// one is a message of person id's, or errNoMessage.
func (s *store) one(ctx context.Context, id int64, msgID string) (Message, error) {
	raw, err := s.rdb.HGet(ctx, personKeys(id)[0], msgID).Result()
	if errors.Is(err, redis.Nil) {
		return Message{}, errNoMessage
	}
	if err != nil {
		return Message{}, err
	}
	return decode(raw)
}

// all are person id's messages, newest first, archived or not: the
// reader's export.
func (s *store) all(ctx context.Context, id int64) ([]Message, error) {
	k := personKeys(id)
	ids, err := s.rdb.ZRevRange(ctx, k[1], 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return []Message{}, err
	}
	raws, err := s.rdb.HMGet(ctx, k[0], ids...).Result()
	if err != nil {
		return nil, err
	}
	out := []Message{}
	for _, r := range raws {
		if r == nil {
			continue
		}
		m, err := decode(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// erase deletes person id's inbox.
func (s *store) erase(ctx context.Context, id int64) error {
	k := personKeys(id)
	// One key at a time: a cluster takes a multi-key DEL only when the
	// keys share a slot, which they do, but a proxy may not know that.
	pipe := s.rdb.Pipeline()
	for _, key := range k {
		pipe.Del(ctx, key)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// change is one entry of a person's log: what a stream sends.
type change struct {
	ID   string // the log's id: the stream's event id
	Kind string // message, update, count
	Data string // JSON
}

// since are person id's changes after the log id last (exclusive), at
// most n; reset is true when the log was trimmed past last, so the
// reader missed something it can no longer be sent (it refetches).
func (s *store) since(ctx context.Context, id int64, last string, n int64) (out []change, reset bool, err error) {
	k := personKeys(id)
	pipe := s.rdb.Pipeline()
	cut := pipe.Get(ctx, k[5])
	newest := pipe.XRevRangeN(ctx, k[4], "+", "-", 1)
	rng := pipe.XRangeN(ctx, k[4], "("+last, "+", n)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, err
	}
	if c, err := cut.Result(); err == nil && laterID(c, last) {
		return nil, true, nil
	}
	// An id past the log's newest was never given by this log: a Redis
	// restored from a backup, a replica behind after a failover, an inbox
	// expired. What the reader has is unknown: they refetch.
	head := "0-0"
	if es := newest.Val(); len(es) > 0 {
		head = es[0].ID
	}
	if laterID(last, head) {
		return nil, true, nil
	}
	var ids []string
	for _, e := range rng.Val() {
		kind, _ := e.Values["k"].(string)
		data, _ := e.Values["d"].(string)
		out = append(out, change{ID: e.ID, Kind: kind, Data: data})
		if kind == "message" || kind == "update" {
			ids = append(ids, data)
		}
	}
	if len(ids) == 0 {
		return out, false, nil
	}
	// A message's entries name it; what is sent is the message as it
	// is now (a message gone since, trimmed or erased, is left out).
	raws, err := s.rdb.HMGet(ctx, k[0], ids...).Result()
	if err != nil {
		return nil, false, err
	}
	i := 0
	for j, ch := range out {
		if ch.Kind == "message" || ch.Kind == "update" {
			raw, _ := raws[i].(string)
			i++
			if raw == "" {
				out[j].Kind = gone
			}
			out[j].Data = raw
		}
	}
	return out, false, nil
}

// gone is the kind of a change whose message is no longer kept: the
// stream sends nothing for it and goes on past its id.
const gone = "gone"

// head is the newest id of person id's log ("0-0" when it is empty).
func (s *store) head(ctx context.Context, id int64) (string, error) {
	es, err := s.rdb.XRevRangeN(ctx, personKeys(id)[4], "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(es) == 0 {
		return "0-0", nil
	}
	return es[0].ID, nil
}

// parseLogID reads a stream id "<ms>-<seq>".
func parseLogID(s string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// laterID tells whether log id a comes after b.
func laterID(a, b string) bool {
	am, as, _ := parseLogID(a)
	bm, bs, _ := parseLogID(b)
	return am > bm || (am == bm && as > bs)
}
