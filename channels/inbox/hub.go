package inbox

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A change to an inbox wakes its open streams on every API replica
// through Redis pub/sub: the writer publishes the person's id on one of
// buckets channels (the id modulo buckets), and each replica that has
// streams open listens on all of them and wakes the person's streams,
// which read what changed from the person's log. A notice carries no
// message, so one lost (a replica reconnecting to Redis) costs only
// time: each stream also reads its log on its heartbeat. On a cluster
// the channels are sharded (SPUBLISH, SSUBSCRIBE), each bucket in the
// slot of its {tag}, so the notices spread over the shards.
const buckets = 16

func bucketChannel(b int64) string { return "ch:inbox:{live" + strconv.FormatInt(b, 10) + "}" }

func personChannel(id int64) string { return bucketChannel(id % buckets) }

// errTooManyStreams: the process, or the person, has as many streams
// open as it allows.
var errTooManyStreams = errors.New("too many open streams")

// hub holds the streams open in this process, by person.
type hub struct {
	rdb       redis.UniversalClient
	log       *slog.Logger
	maxAll    int // streams in this process
	maxPerson int // streams of one person (tabs, devices)

	// reads are the slots of the streams' reads of Redis: a notice to
	// thousands of streams at once (an event to everyone) queues them
	// here, not in the Redis client's pool, whose wait would count
	// against each read's time and fail some, which then wait for their
	// heartbeat.
	reads chan struct{}

	mu      sync.Mutex
	streams map[int64]map[*listener]struct{}
	open    int
	stop    context.CancelFunc // the listening, once started
	// listening is closed once the subscriptions are confirmed (or
	// failed: the heartbeat then stands in), so a stream's first change
	// is not published before anyone listens.
	listening chan struct{}
	closed    bool
}

// listener is one open stream: wake gets a value when its person's
// inbox changed; done is closed when the process ends its streams. A
// detached stream (detached.go) is kicked instead, once attached.
type listener struct {
	wake chan struct{}
	done chan struct{}
	kick func(what int)
	gone func() bool // its client closed its end (detached: it has no read pending)
}

func newHub(rdb redis.UniversalClient, log *slog.Logger, maxAll, maxPerson int) *hub {
	return &hub{rdb: rdb, log: log, maxAll: maxAll, maxPerson: maxPerson, streams: map[int64]map[*listener]struct{}{},
		reads: make(chan struct{}, streamReads)}
}

// streamReads bounds the streams' reads of Redis at once in a process:
// under the Redis client's pool (10 a core and more), so the rest of the
// API keeps connections.
const streamReads = 8

// read waits for a read slot (ctx: the stream's end) and answers its
// release.
func (h *hub) read(ctx context.Context) (func(), error) {
	select {
	case h.reads <- struct{}{}:
		return func() { <-h.reads }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// join opens a stream of person id's, listening to Redis from the first.
func (h *hub) join(id int64) (*listener, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errTooManyStreams
	}
	if h.open >= h.maxAll || len(h.streams[id]) >= h.maxPerson {
		return nil, errTooManyStreams
	}
	if h.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.stop, h.listening = cancel, make(chan struct{})
		go h.listen(ctx)
	}
	l := &listener{wake: make(chan struct{}, 1), done: make(chan struct{})}
	if h.streams[id] == nil {
		h.streams[id] = map[*listener]struct{}{}
	}
	h.streams[id][l] = struct{}{}
	h.open++
	return l, nil
}

// ready waits, at most until ctx ends, for the subscriptions to be
// confirmed.
func (h *hub) ready(ctx context.Context) {
	h.mu.Lock()
	ch := h.listening
	h.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// prune ends person id's detached streams whose client went away (a
// reload, a closed tab: found at their heartbeat otherwise), so a new
// stream of theirs finds room; it answers how many it ended.
func (h *hub) prune(id int64) int {
	h.mu.Lock()
	var ls []*listener
	for l := range h.streams[id] {
		if l.gone != nil {
			ls = append(ls, l)
		}
	}
	h.mu.Unlock()
	n := 0
	for _, l := range ls {
		if l.gone() {
			h.leave(id, l)
			l.kick(doEnd)
			n++
		}
	}
	return n
}

// leave closes a stream.
func (h *hub) leave(id int64, l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.streams[id][l]; !ok {
		return
	}
	delete(h.streams[id], l)
	if len(h.streams[id]) == 0 {
		delete(h.streams, id)
	}
	h.open--
}

// attach has l's notices and its end kick it (a detached stream); if
// the process ended its streams meanwhile, it ends at once.
func (h *hub) attach(l *listener, kick func(what int), gone func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l.kick, l.gone = kick, gone
	if h.closed {
		kick(doEnd)
	}
}

// count is how many streams are open.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// wake wakes person id's streams in this process.
func (h *hub) wake(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.streams[id] {
		if l.kick != nil {
			l.kick(doRead)
			continue
		}
		select {
		case l.wake <- struct{}{}:
		default: // already woken: it reads everything new when it runs
		}
	}
}

// close ends every stream (the server is shutting down: each browser
// reconnects, to another replica, with its Last-Event-ID) and refuses
// new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, ls := range h.streams {
		for l := range ls {
			close(l.done)
			if l.kick != nil {
				l.kick(doEnd)
			}
		}
	}
	h.streams = map[int64]map[*listener]struct{}{}
	h.open = 0
	if h.stop != nil {
		h.stop()
	}
}

// listen receives the notices of every bucket until ctx ends; go-redis
// resubscribes after a lost connection by itself.
func (h *hub) listen(ctx context.Context) {
	var subs []*redis.PubSub
	if c, ok := h.rdb.(*redis.ClusterClient); ok {
		for b := range int64(buckets) {
			subs = append(subs, c.SSubscribe(ctx, bucketChannel(b)))
		}
	} else {
		names := make([]string, buckets)
		for b := range int64(buckets) {
			names[b] = bucketChannel(b)
		}
		subs = append(subs, h.rdb.Subscribe(ctx, names...))
	}
	for _, ps := range subs {
		if _, err := ps.Receive(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("inbox: subscribe to changes (streams read their logs on each heartbeat meanwhile)", "err", err)
		}
	}
	close(h.listening)
	var wg sync.WaitGroup
	for _, ps := range subs {
		wg.Go(func() {
			defer func() {
				if err := ps.Close(); err != nil {
					h.log.Debug("inbox: close a subscription", "err", err)
				}
			}()
			ch := ps.Channel(redis.WithChannelSize(1024))
			for {
				select {
				case <-ctx.Done():
					return
				case m, ok := <-ch:
					if !ok {
						return
					}
					if id, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
						h.wake(id)
					}
				}
			}
		})
	}
	wg.Wait()
}

// publishCmd queues the notice that person id's inbox changed on pipe.
func publishCmd(ctx context.Context, rdb redis.UniversalClient, pipe redis.Pipeliner, id int64) {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		pipe.SPublish(ctx, personChannel(id), strconv.FormatInt(id, 10))
		return
	}
	pipe.Publish(ctx, personChannel(id), strconv.FormatInt(id, 10))
}

// publish tells every replica that person id's inbox changed. A lost
// notice delays a stream until its heartbeat, so it is logged, not
// returned.
func (h *hub) publish(ctx context.Context, id int64) {
	pipe := h.rdb.Pipeline()
	publishCmd(ctx, h.rdb, pipe, id)
	if _, err := pipe.Exec(ctx); err != nil {
		h.log.Warn("inbox: publish a change", "subscriber", id, "err", err)
	}
}
