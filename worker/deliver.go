package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// ErrDeliveryBusy means another run holds the delivery mark: the same mail
// is being sent right now, or a worker died holding it. The task is retried
// after the claim could have expired; it is not a failure.
var ErrDeliveryBusy = errors.New("delivery mark is held by another run")

// DefaultClaimTTL bounds how long a dead worker's claim blocks a retry. It
// is longer than any task's timeout, so a live sender never loses its claim.
const DefaultClaimTTL = 3 * time.Minute

// DefaultThrottle is how long a domain that answered "slow down" is paused.
const DefaultThrottle = time.Minute

// DeliveryStore is what the deliverer needs of the store: the subscriber
// re-read, the delivery marks, and the bounce report after a permanent
// failure.
type DeliveryStore interface {
	Get(ctx context.Context, email string) (store.Subscriber, error)
	GetByID(ctx context.Context, id int64) (store.Subscriber, error)
	StatusByID(ctx context.Context, id int64) (store.Status, error)
	FeedbackStore
	store.Marks
}

// Deliverer is the one path every mail takes, whatever its kind: re-read
// the subscriber (Recipient), claim the delivery marks, pace, render, send
// over one SMTP session, mark sent. A single mail is a batch of one.
type Deliverer struct {
	Store  DeliveryStore
	Mailer mailer.Mailer
	Render *mailer.Renderer
	// Pace, when set, holds bulk mail to the shared send rate and honours
	// domains that asked us to slow down.
	Pace Pacer
	// ConfirmPace, when set, holds confirmations to their own rate across
	// the service (NEWSLETTER_CONFIRM_RATE): an attack's ceiling.
	ConfirmPace Pacer
	// Throttle is how long such a domain is paused (DefaultThrottle).
	Throttle time.Duration
	// ClaimTTL is the claims' expiry (DefaultClaimTTL).
	ClaimTTL time.Duration
	Metrics  *Metrics
	Log      *slog.Logger
	// Tags, when set, traces each mail to its subscriber in a late bounce
	// or complaint (the VERP tag in its envelope sender and Message-ID).
	Tags *feedback.Tagger
	// Notify queues subscriber.bounced for an address that bounced at
	// sending (nil: none), when Feedback is nil.
	Notify *webhooks.Notifier
	// Feedback records a bounce at sending as every other bounce report
	// (nil: a recorder on Store with the default policy, Metrics, Log
	// and Notify).
	Feedback *FeedbackRecorder

	// marks writes sent marks for all senders of the worker together
	// (marks.go); nil: each mark in a round trip of its own.
	marks *markWriter
}

// Mail is one mail to deliver: to whom, under which mark, with what data.
type Mail struct {
	To   store.Subscriber
	Mark store.Mark
	Data mailer.Data
	// Prepared, when set, renders the mail from a rendering shared by the
	// batch (mailer.Prepare): the same result as a full render, for a
	// fraction of the CPU.
	Prepared *mailer.Prepared
	// CountAs is the kind the metrics count the mail as (Mark.Kind when
	// empty): the weekly digest's issue counts as a digest, so the
	// digest's dashboards and alerts read as they always did.
	CountAs string
	// Recheck, when set, is the status the reader must still have right
	// before the mail goes: its status is read again then (one HGET) and
	// the mail is skipped (ErrNotWanted) otherwise. A batch that read its
	// readers at its start and sends for seconds (an issue) sets it, so a
	// reader who unsubscribes, bounces or complains meanwhile gets nothing.
	Recheck store.Status
}

// ErrNotWanted is the Failure (with SkipRetry) of a mail whose reader no
// longer had its Recheck status when it was about to go: skipped, not
// failed.
var ErrNotWanted = errors.New("the reader's status changed before the mail went")

func (m Mail) countAs() string {
	if m.CountAs != "" {
		return m.CountAs
	}
	return m.Mark.Kind
}

// Failure is a mail that failed for good (SkipRetry): bounced, rejected
// by policy, or unrenderable. Its claim is released and nothing retries it.
type Failure struct {
	SubscriberID int64
	Err          error
}

// Recipient re-reads the subscriber right before sending. ok is false when
// nothing should be sent; err is then nil (skip) or a store failure (retry).
// A suppressed subscriber whose own confirmation was asked for
// (Reconfirming) counts as Pending: the confirmation is the one mail it
// may get.
func (d *Deliverer) Recipient(ctx context.Context, email string, want store.Status) (sub store.Subscriber, ok bool, err error) {
	sub, err = d.Store.Get(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		d.Log.Info("skip: unknown subscriber", "domain", address.Domain(email))
		return sub, false, nil
	}
	return d.recipient(sub, err, want)
}

// RecipientByID is Recipient for a task that names its subscriber by id
// (an erased one is not found: skipped).
func (d *Deliverer) RecipientByID(ctx context.Context, id int64, want store.Status) (sub store.Subscriber, ok bool, err error) {
	sub, err = d.Store.GetByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		d.Log.Info("skip: unknown subscriber", "subscriber", id)
		return sub, false, nil
	}
	return d.recipient(sub, err, want)
}

func (d *Deliverer) recipient(sub store.Subscriber, err error, want store.Status) (store.Subscriber, bool, error) {
	if err != nil {
		return sub, false, fmt.Errorf("load subscriber: %w", err)
	}
	if sub.Status != want && !(want == store.Pending && sub.Reconfirming) {
		d.Log.Info("skip: subscription not "+string(want), "subscriber", sub.ID, "status", sub.Status)
		return sub, false, nil
	}
	return sub, true, nil
}

// DeliverOne delivers a single mail: nil when it was sent or had been
// already, a SkipRetry error when it failed for good, any other error to
// retry the task.
func (d *Deliverer) DeliverOne(ctx context.Context, m Mail) error {
	failed, err := d.Deliver(ctx, []Mail{m})
	if len(failed) > 0 {
		return failed[0].Err
	}
	return err
}

// Deliver sends mails in order over one connection. It claims every mark
// up front (one round trip), skips those already sent, and sends the rest,
// each paced and marked on its own. It returns the mails that failed for
// good, and the error that should retry the task for the others (nil when
// none is left). Every claim it does not turn into a sent mark is
// released, so the retry sends exactly the mails that are missing.
func (d *Deliverer) Deliver(ctx context.Context, mails []Mail) (failed []Failure, err error) {
	failed, _, err = d.DeliverGated(ctx, mails, nil)
	return failed, err
}

// Gate tells a batch whether to go on sending: it is asked right before
// each mail goes out (after its pacing), so it should answer from memory
// most of the time. stop hands the rest of the batch back unsent; an
// error does too, and retries the task.
type Gate func(ctx context.Context) (stop bool, err error)

// DeliverGated is Deliver asking gate (nil: none) before each mail: the
// batch is still claimed, paced and sent as one (one claim round trip,
// one SMTP session, send slots taken for the whole batch), and a stop
// releases the claims of the mails it did not send. stopped is how many
// of them the gate stopped.
func (d *Deliverer) DeliverGated(ctx context.Context, mails []Mail, gate Gate) (failed []Failure, stopped int, err error) {
	// Whatever way this returns, the marks of the mails it sent are
	// written first: a task that ends has its deliveries recorded.
	var marked sync.WaitGroup
	if d.marks != nil {
		defer d.marks.wait(&marked)
	}
	b := &gatedBatch{d: d, mails: mails, gate: gate, marked: &marked, mailer: d.Mailer}
	if err := b.claim(ctx); err != nil {
		return nil, 0, err
	}
	if o, ok := d.Mailer.(mailer.Opener); ok && countClaimed(b.claims) > 0 {
		sess, err := o.Open(ctx)
		if err != nil {
			return nil, 0, b.giveBack(ctx, 0, err)
		}
		defer func() {
			if cerr := sess.Close(); cerr != nil {
				d.Log.Warn("close SMTP session", "err", cerr)
			}
		}()
		b.mailer = sess
	}

	b.pace, b.confirms = newPacer(ctx, d.Pace), newPacer(ctx, d.ConfirmPace)
	// The claims were taken up front; stop well before they could expire
	// under a slow gateway, and let a fresh run claim the rest.
	b.stopAt = time.Now().Add(d.ClaimTTL / 2)
	for i := range mails {
		if done, stopped, err := b.deliver(ctx, i); done {
			return b.failed, stopped, err
		}
	}
	return b.failed, 0, b.retry
}

// gatedBatch is one DeliverGated run: the batch's mails and their
// claims, the session and pacers they go out through, and what the run
// has found so far (the mails failed for good, the error to retry on).
type gatedBatch struct {
	d      *Deliverer
	mails  []Mail
	gate   Gate
	marked *sync.WaitGroup

	marks          []store.Mark
	claims         []store.Claim
	mailer         mailer.Mailer
	pace, confirms *pacer
	stopAt         time.Time
	failed         []Failure
	retry          error
}

// claim claims the marks of all the batch's mails in one round trip.
func (b *gatedBatch) claim(ctx context.Context) error {
	b.marks = make([]store.Mark, len(b.mails))
	for i, m := range b.mails {
		b.marks[i] = m.Mark
	}
	// The claims name the task: its retry takes them over at once when
	// this attempt dies without releasing them (Redis away, say), and
	// claiming again after a lost answer takes over what the first try
	// took.
	owner, _ := asynq.GetTaskID(ctx)
	claims, err := b.d.Store.ClaimMarks(ctx, owner, b.marks, b.d.ClaimTTL)
	if err != nil {
		return fmt.Errorf("claim delivery: %w", err)
	}
	b.claims = claims
	return nil
}

// giveBack releases the claims this run still holds from index i on,
// when it stops early and hands those mails to a retry.
func (b *gatedBatch) giveBack(ctx context.Context, i int, why error) error {
	var held []store.Mark
	for j := i; j < len(b.mails); j++ {
		if b.claims[j] == store.Claimed {
			held = append(held, b.marks[j])
		}
	}
	return b.d.release(ctx, held, why)
}

// deliver paces, gates and sends the batch's mail i. done says the run
// ends here, returning stopped and err (with the failures so far).
func (b *gatedBatch) deliver(ctx context.Context, i int) (done bool, stopped int, err error) {
	d, mail, p := b.d, b.mails[i], b.pace
	switch b.claims[i] {
	case store.AlreadySent:
		d.Log.Info("skip: already sent", "kind", mail.Mark.Kind, "subscriber", mail.To.ID)
		return false, 0, nil
	case store.Busy:
		b.retry = firstErr(b.retry, fmt.Errorf("%s to subscriber %d: %w", mail.Mark.Kind, mail.To.ID, ErrDeliveryBusy))
		return false, 0, nil
	}
	if time.Now().After(b.stopAt) {
		return true, 0, b.giveBack(ctx, i, firstErr(b.retry, &Deferred{Reason: "delivery ran for half its claim time", In: time.Second}))
	}
	domain := address.Domain(mail.To.Email)
	pause, err := p.domainPause(ctx, domain)
	if err == nil && pause > maxInlineWait && !p.last {
		// This receiver asked us to slow down: leave its mail to the
		// retry and carry on with the others.
		if err := d.release(ctx, []store.Mark{mail.Mark}, nil); err != nil {
			return true, 0, b.giveBack(ctx, i+1, err)
		}
		b.retry = firstErr(b.retry, &Deferred{Reason: "receiver " + domain + " asked us to slow down", In: pause})
		return false, 0, nil
	}
	personal := transactional(mail.Mark.Kind)
	if err == nil {
		err = p.wait(ctx, domain, !personal, len(b.mails)-i)
	}
	if err == nil && personal {
		err = b.confirms.take(ctx, 1)
	}
	if err != nil {
		// Hand the rest back; the retry sends only to them.
		return true, 0, b.giveBack(ctx, i, err)
	}
	if b.gate != nil {
		stop, err := b.gate(ctx)
		if err != nil {
			return true, 0, b.giveBack(ctx, i, firstErr(b.retry, err))
		}
		if stop {
			return true, countClaimed(b.claims[i:]), b.giveBack(ctx, i, b.retry)
		}
	}
	return b.sent(ctx, i, domain, d.send(ctx, b.mailer, mail, b.marked))
}

// sent records the outcome err of sending the batch's mail i to domain:
// a failure for good, a throttled receiver, an error to retry on, or a
// paused transport that ends the run (done, returning err).
func (b *gatedBatch) sent(ctx context.Context, i int, domain string, err error) (done bool, stopped int, _ error) {
	switch {
	case err == nil:
	case errors.Is(err, asynq.SkipRetry):
		b.failed = append(b.failed, Failure{SubscriberID: b.mails[i].To.ID, Err: err})
	default:
		if email.AsPaused(err) != nil {
			// The transport refuses every mail for now: hand the
			// rest back and let the task wait out the pause, not
			// counted as a failure (PausedError.RetryAfter).
			b.d.paused(1)
			return true, 0, b.giveBack(ctx, i+1, err)
		}
		if se := email.AsSendError(err); se != nil && se.Class == email.Throttled {
			b.pace.domains[domain] = max(b.d.Throttle, time.Second)
		}
		b.retry = firstErr(b.retry, err)
	}
	return false, 0, nil
}

// paused sets the e-mail lane's newsletter_transport_paused.
func (d *Deliverer) paused(v float64) {
	d.Metrics.TransportPaused.WithLabelValues(LaneEmail).Set(v)
}

// send renders one mail, sends it through m and records the outcome: the
// metric and the sent mark, or the claim released and the failure
// classified (sendFailed). The caller holds the mail's claim.
func (d *Deliverer) send(ctx context.Context, m mailer.Mailer, mail Mail, marked *sync.WaitGroup) error {
	var msg *mailer.Message
	var err error
	if mail.Prepared != nil {
		msg, err = mail.Prepared.RenderFor(m, mail.Data)
	} else {
		msg, err = d.Render.Render(mail.Mark.Kind, mail.Data)
	}
	if err != nil {
		d.countFailure(mail.countAs(), email.Invalid)
		se := &email.SendError{Class: email.Invalid, Domain: address.Domain(mail.To.Email), Err: fmt.Errorf("render %s: %v", mail.Mark.Kind, err)}
		return d.release(ctx, []store.Mark{mail.Mark}, fmt.Errorf("%w: %w", se, asynq.SkipRetry))
	}
	// The To: header names the person only where the mail's data does:
	// a confirmation or a link mailed on request carries no name, since
	// the name was typed by whoever filled in the form.
	msg.ToName, msg.Tag = mail.Data.Name, d.tag(mail)
	if d.marks != nil {
		// A slot of the window of sent-but-unmarked mails (marks.go).
		if err := d.marks.acquire(ctx); err != nil {
			return d.release(ctx, []store.Mark{mail.Mark}, err)
		}
	}
	if err := d.recheck(ctx, mail); err != nil {
		if d.marks != nil {
			d.marks.release()
		}
		return d.release(ctx, []store.Mark{mail.Mark}, err)
	}
	if err := m.Send(ctx, msg); err != nil {
		if d.marks != nil {
			d.marks.release()
		}
		// Release even when the outcome is unknown (connection dropped
		// after DATA): keeping the claim would only delay the same retry.
		return d.release(ctx, []store.Mark{mail.Mark}, d.sendFailed(ctx, mail, err))
	}
	d.Metrics.Sent.WithLabelValues(mail.countAs()).Inc()
	d.paused(0)
	if d.marks != nil {
		d.marks.add(mail.Mark, marked)
		return nil
	}
	if err := d.Store.MarkSent(ctx, mail.Mark); err != nil {
		// The mail is out. Returning an error would retry and could send
		// it again once the claim expires; a missing mark costs nothing
		// more than that, so log and succeed.
		d.Log.Error("mark sent failed after delivery", "kind", mail.Mark.Kind, "subscriber", mail.To.ID, "err", err)
	}
	return nil
}

// tag is the VERP tag of a mail: an issue's names the issue, so a late
// bounce or complaint counts against it.
func (d *Deliverer) tag(mail Mail) string {
	if issue := mail.issue(); issue > 0 {
		return d.Tags.IssueTag(mail.To.ID, issue)
	}
	return d.Tags.Tag(mail.To.ID, mail.Mark.Kind)
}

// issue is the issue a mail is (its mark's key), 0 for other mail.
func (m Mail) issue() int64 {
	if m.Mark.Kind != store.IssueMarkKind {
		return 0
	}
	issue, err := strconv.ParseInt(m.Mark.Key, 10, 64)
	if err != nil || issue <= 0 {
		return 0
	}
	return issue
}

// sendTimeBounce is the bounce report of a mail the receiver refused for
// good while we sent it. Its id names the mail (kind, key, subscriber), so
// the same answer applied twice (a lost reply from Redis) counts once.
func sendTimeBounce(mail Mail, se *email.SendError) tasks.FeedbackPayload {
	sum := sha256.Sum256([]byte(mail.Mark.Kind + "\x00" + mail.Mark.Key + "\x00" + strconv.FormatInt(mail.To.ID, 10)))
	reason := se.Enhanced
	if se.Code > 0 {
		reason = strings.TrimSpace(strconv.Itoa(se.Code) + " " + se.Enhanced)
	}
	return tasks.FeedbackPayload{
		ID: "send-" + hex.EncodeToString(sum[:12]), SubscriberID: mail.To.ID, Email: mail.To.Email,
		Type: string(store.HardBounce), Source: "smtp", Kind: mail.Mark.Kind, IssueID: mail.issue(), Reason: reason,
	}
}

// recheck reads the reader's status again when the mail asks for it
// (Mail.Recheck), the last step before the SMTP transaction: an error
// to retry on, ErrNotWanted with SkipRetry when it changed, nil to send.
func (d *Deliverer) recheck(ctx context.Context, mail Mail) error {
	if mail.Recheck == "" {
		return nil
	}
	st, err := d.Store.StatusByID(ctx, mail.To.ID)
	if errors.Is(err, store.ErrNotFound) {
		st, err = "", nil // erased meanwhile
	}
	if err != nil {
		return err
	}
	if st != mail.Recheck {
		d.Log.Info("skip: status changed during the batch", "kind", mail.Mark.Kind, "subscriber", mail.To.ID, "status", st)
		return fmt.Errorf("%w: %w", ErrNotWanted, asynq.SkipRetry)
	}
	return nil
}

// release gives claims back after a failed or abandoned send and returns
// why (the error the caller goes on with). A failed release is joined to
// it: those claims then block their mails until they expire.
func (d *Deliverer) release(ctx context.Context, marks []store.Mark, why error) error {
	if len(marks) == 0 {
		return why
	}
	if err := d.Store.ReleaseMarks(ctx, marks); err != nil {
		d.Log.Warn("release delivery marks; they expire on their own", "marks", len(marks), "err", err)
		if why == nil {
			return err
		}
		if errors.Is(why, asynq.SkipRetry) {
			return why // the failure is final whatever happens to the claim
		}
		return errors.Join(why, err)
	}
	return why
}

func (d *Deliverer) countFailure(kind string, c email.Class) {
	d.Metrics.Failed.WithLabelValues(kind, c.String()).Inc()
}

// sendFailed decides between retry, suppression and alerting.
func (d *Deliverer) sendFailed(ctx context.Context, mail Mail, err error) error {
	se := email.AsSendError(err)
	if se == nil {
		se = &email.SendError{Class: email.Temporary, Domain: address.Domain(mail.To.Email), Err: err}
	}
	kind := mail.Mark.Kind
	if pe := email.AsPaused(err); pe != nil {
		// Held, not failed: newsletter_transport_paused tells.
		d.Log.Warn("transport paused: mail held", "kind", kind, "subscriber", mail.To.ID, "for", pe.In, "reason", pe.Reason)
		return se
	}
	d.countFailure(mail.countAs(), se.Class)
	d.Log.Warn("send failed", "kind", kind, "subscriber", mail.To.ID, "domain", se.Domain,
		"class", se.Class.String(), "code", se.Code, "enhanced", se.Enhanced)
	switch se.Class {
	case email.Throttled:
		if d.Pace != nil {
			if err := d.Pace.Throttle(ctx, se.Domain, d.Throttle); err != nil {
				d.Log.Warn("pause domain", "domain", se.Domain, "err", err)
			}
		}
	case email.Bounced:
		// The receiver's answer is a bounce report like any other: the
		// one recorder keeps it in the person's history, counts it against
		// the mail's issue or digest run, and says whether it changed the
		// subscriber (only then is subscriber.bounced sent).
		if err := d.Feedback.Record(ctx, sendTimeBounce(mail, se)); err != nil {
			return fmt.Errorf("record bounce after %v: %w", se, err) // retry; the next try bounces again
		}
		return fmt.Errorf("%w: %w", se, asynq.SkipRetry)
	case email.Rejected, email.Invalid:
		return fmt.Errorf("%w: %w", se, asynq.SkipRetry)
	}
	return se
}

// Unrenderable tells a failure of the mail itself (a template that fails,
// a message that cannot be built): it never reached the receiver.
func Unrenderable(err error) bool {
	se := email.AsSendError(err)
	return se != nil && se.Class == email.Invalid
}

// transactional tells the mails a person waits for with a page open (a
// confirmation, an unsubscribe link): not held by the bulk send rate, but
// by ConfirmPace, the ceiling of an attack through our public forms.
func transactional(kind string) bool {
	return kind == mailer.KindConfirm || kind == mailer.KindUnsubscribe || kind == mailer.KindPreferences
}

func countClaimed(claims []store.Claim) int {
	n := 0
	for _, c := range claims {
		if c == store.Claimed {
			n++
		}
	}
	return n
}

// firstErr keeps the first error that should retry the task.
func firstErr(kept, err error) error {
	if kept != nil {
		return kept
	}
	return err
}
