package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/store"
)

// A mail is at risk of being sent twice from the server's 250 until its
// sent mark is in Redis: a worker killed in between leaves a claim that
// expires, and the retry sends again. Marking each mail in a round trip of
// its own kept that window at one mail per concurrent sender, but cost
// Redis more CPU than everything else a mail needs (a request per mail).
//
// markWriter keeps the same bound and pays far less: a sender takes a slot
// before it sends (window slots in all, the worker's concurrency), and the
// slot is given back once the mark is written. Marks from every sender of
// the worker are written together, in one pipeline per flush: a flush goes
// a short linger after its first mark, or at once when a sender waits for
// its marks (the end of a batch, a single mail). So at most `window` mails
// are ever sent and unmarked, as before, and a killed worker still doubles
// at most that many.
//
// While Redis is away (restarting, say) a flush waits for it for up to
// the handlers' RedisWait (redisconn.DefaultWait), holding its slots: the senders stop at a full window
// instead of sending mails that could not be marked, and once Redis is
// back the marks go in and sending goes on, with nothing to send twice.
//
// A sender that finds the window full waits for the linger rather than
// forcing a flush: with every sender busy the window is nearly always
// full, and flushing on demand wrote 2.75 marks a round trip (Redis 30 µs
// a mail); waiting 1 ms writes several times more per round trip (17 µs)
// and costs no throughput, since on a busy worker the CPU the senders do
// not use while they wait goes to the others.
type markWriter struct {
	// store is written under ctx, which waits out an unreachable Redis
	// (redisconn.WaitOut; past its bound the marks are given up, logged:
	// their claims then keep other runs out until they expire, and the
	// same task's retry takes them over and sends those mails again).
	store  store.Marks
	ctx    context.Context
	log    *slog.Logger
	slots  chan struct{}
	in     chan pendingMark
	kick   chan struct{}
	linger time.Duration

	stop chan struct{}
	wg   sync.WaitGroup
}

type pendingMark struct {
	mark store.Mark
	done *sync.WaitGroup
}

// markLinger is how long a flush waits for more marks after the first: how
// many marks share a round trip, and the longest a sender waits for a slot.
const markLinger = time.Millisecond

func newMarkWriter(s store.Marks, window int, linger time.Duration, wait redisconn.Wait) *markWriter {
	w := &markWriter{
		// The writer runs for no task: it opts in to the wait itself, and
		// to sending a write again whose answer was lost (a primary
		// killed with it in flight): the marks are safe to write twice,
		// and a mark lost leaves the mail's issue one short for good.
		store: s, ctx: redisconn.WaitOut(context.Background(), resending(wait)), log: wait.Log,
		slots: make(chan struct{}, max(window, 1)),
		in:    make(chan pendingMark, max(window, 1)), kick: make(chan struct{}, 1),
		linger: linger, stop: make(chan struct{}),
	}
	w.wg.Add(1)
	go w.loop()
	return w
}

// resending is wait with Resend set.
func resending(wait redisconn.Wait) redisconn.Wait {
	wait.Resend = true
	return wait
}

// acquire takes a slot for one mail about to be sent.
func (w *markWriter) acquire(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives a slot back without a mark: the mail was not sent.
func (w *markWriter) release() { <-w.slots }

// add queues m, whose mail was just accepted; done is marked when m is
// written (or failed to be, which is logged) and its slot freed.
func (w *markWriter) add(m store.Mark, done *sync.WaitGroup) {
	done.Add(1)
	w.in <- pendingMark{mark: m, done: done} // never blocks: one per slot
}

// flushNow asks for the queued marks to go without the linger.
func (w *markWriter) flushNow() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wait returns once every mark added with done is written.
func (w *markWriter) wait(done *sync.WaitGroup) {
	w.flushNow()
	done.Wait()
}

func (w *markWriter) loop() {
	defer w.wg.Done()
	batch := make([]pendingMark, 0, cap(w.slots))
	for {
		select {
		case pm := <-w.in:
			batch = append(batch[:0], pm)
		case <-w.stop:
			return
		}
		timer := time.NewTimer(w.linger)
	collect:
		for len(batch) < cap(w.slots) {
			select {
			case pm := <-w.in:
				batch = append(batch, pm)
			case <-w.kick:
				// Take what is already queued, then go.
				for len(batch) < cap(w.slots) {
					select {
					case pm := <-w.in:
						batch = append(batch, pm)
					default:
						break collect
					}
				}
				break collect
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		w.flush(batch)
	}
}

func (w *markWriter) flush(batch []pendingMark) {
	marks := make([]store.Mark, len(batch))
	for i, pm := range batch {
		marks[i] = pm.mark
	}
	if err := w.write(marks); err != nil {
		// The mails are out. Failing their tasks would retry them and
		// could send them again once the claims expire; a missing mark
		// costs nothing more than that, so log and go on.
		w.log.Error("mark sent failed after delivery", "marks", len(marks), "err", err)
	}
	for _, pm := range batch {
		<-w.slots
		pm.done.Done()
	}
}

// write writes marks, waiting while Redis cannot be reached (w.ctx). Not
// under the task's context: the mails are out, and their marks must be
// written even when the task that sent them was cancelled. The writer's
// context is never done, so the write is bounded by the wait's bound: a
// Redis that hangs rather than refuses must not hold the marks longer
// than one that refuses.
func (w *markWriter) write(marks []store.Mark) error {
	wait, _ := redisconn.WaitOf(w.ctx)
	ctx, cancel := context.WithTimeout(w.ctx, wait.For)
	defer cancel()
	return w.store.MarkSent(ctx, marks...)
}

// close stops the writer. Every sender waits for its own marks before its
// task ends, so nothing is queued by then.
func (w *markWriter) close() {
	close(w.stop)
	w.wg.Wait()
}
