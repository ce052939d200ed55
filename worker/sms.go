package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// LaneSMS is the sms lane's label value.
const LaneSMS = tasks.LaneSMS

// SMSMarkKind is the delivery mark kind of one text to one person.
const SMSMarkKind = "sms"

// SMSStore is what the sms lane's handler needs of the store.
type SMSStore interface {
	GetByID(ctx context.Context, id int64) (store.Subscriber, error)
	PhonesOf(ctx context.Context, ids []int64) ([]store.Phone, error)
	SetNumberState(ctx context.Context, number, state string) error
	NumberState(ctx context.Context, number string) (string, error)
	TakeSMSAllowance(ctx context.Context, number, day string, perNumber, perDay int) (string, error)
	PhoneCodeSent(ctx context.Context, id int64, number, code, messageSID string) error
	GiveSMSAllowance(ctx context.Context, number, day string) error
	OrderStore
	store.Marks
}

// SMSSender handles sms:deliver in the sms lane: one text to one person's
// number under a delivery mark, so a retry (a 503, a timeout, a killed
// worker) never texts twice but for a worker killed between the gateway's
// answer and the mark. The lane's pool and shared rate (NEWSLETTER_SMS_RATE)
// are its own: a gateway that hangs backs up this lane alone.
type SMSSender struct {
	Store SMSStore
	// Channel texts (sms.Channel); the lane acts on its Outcomes.
	Channel channels.Sender
	// MaxSegments caps a text (a longer one is a dead letter).
	MaxSegments int
	// PerNumberDay and PerDay cap a day's texts to one number and in
	// all: past them a text waits for the next day (UTC).
	PerNumberDay, PerDay int
	Quiet                *quiet.Hours
	Retry                RetryPolicy
	ClaimTTL             time.Duration
	Now                  func() time.Time
	Metrics              *Metrics
	Log                  *slog.Logger
}

// HandleSMS handles sms:deliver. A person no longer active or without the
// text's topics, without a number, or whose number said STOP or cannot
// take SMS, gets nothing (dropped). A text over the segment cap is a dead
// letter. Inside the person's quiet hours, or past a daily cap, it waits.
// A number the gateway says is invalid or opted out is retired; another
// refusal drops the text; a 429, a 5xx, a timeout retries it.
func (h *SMSSender) HandleSMS(ctx context.Context, p tasks.SMSPayload) error {
	return inOrder(ctx, h.Store, store.ChannelSMS, p.Key, p.SubscriberID, p.At, func() error { return h.textOne(ctx, p) })
}

// textOne is HandleSMS once the event's turn has come for its person.
func (h *SMSSender) textOne(ctx context.Context, p tasks.SMSPayload) error {
	if err := sms.CheckLength(p.Text, h.MaxSegments); err != nil {
		h.count("dead")
		return fmt.Errorf("sms: %v: %w", err, asynq.SkipRetry)
	}
	sub, err := h.Store.GetByID(ctx, p.SubscriberID)
	if errors.Is(err, store.ErrNotFound) {
		h.count("dropped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("sms: load subscriber: %w", err)
	}
	if sub.Status != store.Active || !slices.ContainsFunc(p.Topics, func(tp string) bool { return slices.Contains(sub.Topics, tp) }) {
		h.count("dropped")
		return nil
	}
	phones, err := h.Store.PhonesOf(ctx, []int64{sub.ID})
	if err != nil {
		return fmt.Errorf("sms: load the number: %w", err)
	}
	phone := phones[0]
	if phone.Number == "" || phone.State != store.NumberOn {
		h.Log.Info("sms: skip, no number that takes SMS", "subscriber", sub.ID, "state", phone.State)
		h.count("dropped")
		return nil
	}
	now := h.Now()
	if until := h.Quiet.Until(sub.Timezone, now); !until.IsZero() {
		return &Deferred{Reason: "the reader's quiet hours", In: until.Sub(now)}
	}
	mark := store.Mark{Kind: SMSMarkKind, Key: p.Key, SubscriberID: sub.ID}
	owner, _ := asynq.GetTaskID(ctx)
	claims, err := h.Store.ClaimMarks(ctx, owner, []store.Mark{mark}, h.ClaimTTL)
	if err != nil {
		return fmt.Errorf("sms: claim: %w", err)
	}
	switch claims[0] {
	case store.AlreadySent:
		return nil
	case store.Busy:
		return ErrDeliveryBusy
	}
	return h.text(ctx, sub.ID, phone.Number, p.Text, mark, now)
}

// text sends the claimed text within the day's caps and settles the mark.
func (h *SMSSender) text(ctx context.Context, subID int64, number, body string, mark store.Mark, now time.Time) error {
	release := func() {
		if err := h.Store.ReleaseMarks(context.Background(), []store.Mark{mark}); err != nil {
			h.Log.Warn("sms: claim not released", "err", err) // it expires (ClaimTTL)
		}
	}
	day := now.UTC().Format(time.DateOnly)
	capped, err := h.Store.TakeSMSAllowance(ctx, number, day, h.PerNumberDay, h.PerDay)
	if err != nil {
		release()
		return fmt.Errorf("sms: daily cap: %w", err)
	}
	if capped != "" {
		release()
		h.Metrics.SMSCapReached.WithLabelValues(capped).Inc()
		h.Log.Warn("sms: daily cap reached; the text waits for tomorrow", "subscriber", subID, "cap", capped)
		tomorrow := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		return &Deferred{Reason: "the day's SMS cap", In: tomorrow.Sub(now)}
	}
	out := h.textVia(ctx, number, body)
	if out.Verdict == channels.Sent {
		// Not under the task's context: the text is out, its mark must
		// be written even if the task was cancelled.
		if merr := h.Store.MarkSent(context.Background(), mark); merr != nil {
			h.Log.Error("sms: mark sent failed after delivery", "subscriber", subID, "err", merr)
		}
		h.count("sent")
		return nil
	}
	release()
	if gerr := h.Store.GiveSMSAllowance(context.Background(), number, day); gerr != nil {
		h.Log.Warn("sms: allowance not given back", "err", gerr)
	}
	switch out.Verdict {
	case channels.Retire:
		if serr := h.Store.SetNumberState(ctx, number, store.NumberRetired); serr != nil {
			return fmt.Errorf("sms: retire the number: %w", serr)
		}
		h.Log.Info("sms: number cannot take SMS, retired", "subscriber", subID, "err", out.Err)
		h.count("dropped")
	case channels.Drop:
		h.Log.Warn("sms: refused, not retried", "subscriber", subID, "err", out.Err)
		h.count("dead")
	default:
		h.count("retry")
		return &deliveryFailure{msg: out.Err.Error(), wait: out.After}
	}
	return nil
}

// textVia sends one text through the channel and answers its Outcome.
func (h *SMSSender) textVia(ctx context.Context, number, body string) channels.Outcome {
	return h.Channel.Send(ctx, []channels.Message{{To: number, Body: []byte(body)}})[0]
}

// RetryDelay is the sms lane's asynq RetryDelayFunc: a deferral's wait,
// the gateway's Retry-After when longer than the lane's backoff, or the
// backoff.
func (h *SMSSender) RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	return h.Retry.ProviderDelay(n, err, t)
}

func (h *SMSSender) count(result string) {
	h.Metrics.Notifications.WithLabelValues(LaneSMS, result).Inc()
}

// HandleSMSCode texts the code that proves a number a person gave. It is
// not an event's text: no topic or channel is asked, and no mark (a code
// sent twice is a second text, never a wrong one). A code past its end, a
// number that replied STOP, or a day's cap reached: dropped (the person
// asks again). A refusal retires the number or drops the code; a 503
// retries while the code lasts. Only once the gateway took the text can
// the code be entered: its message SID is recorded with it, and is the
// consent's proof.
func (h *SMSSender) HandleSMSCode(ctx context.Context, p tasks.SMSCodePayload) error {
	now := h.Now()
	if !now.Before(p.Until) {
		h.count("dropped")
		return nil
	}
	state, err := h.Store.NumberState(ctx, p.Number)
	if err != nil {
		return fmt.Errorf("sms code: %w", err)
	}
	if state == store.NumberStopped {
		h.Log.Info("sms code: the number replied STOP; not sent", "subscriber", p.SubscriberID)
		h.count("dropped")
		return nil
	}
	day := now.UTC().Format(time.DateOnly)
	capped, err := h.Store.TakeSMSAllowance(ctx, p.Number, day, h.PerNumberDay, h.PerDay)
	if err != nil {
		return fmt.Errorf("sms code: daily cap: %w", err)
	}
	if capped != "" {
		h.Metrics.SMSCapReached.WithLabelValues(capped).Inc()
		h.Log.Warn("sms code: the day's cap reached; not sent", "subscriber", p.SubscriberID, "cap", capped)
		h.count("dropped")
		return nil
	}
	out := h.textVia(ctx, p.Number, p.Text)
	switch out.Verdict {
	case channels.Sent:
		h.codeSent(ctx, p, out.ProviderID)
		h.count("sent")
		return nil
	case channels.Retire:
		if serr := h.Store.SetNumberState(ctx, p.Number, store.NumberRetired); serr != nil {
			return fmt.Errorf("sms code: retire the number: %w", serr)
		}
		h.count("dropped")
		return nil
	case channels.Drop:
		h.Log.Warn("sms code: refused", "subscriber", p.SubscriberID, "err", out.Err)
		h.count("dead")
		return nil
	}
	if gerr := h.Store.GiveSMSAllowance(context.Background(), p.Number, day); gerr != nil {
		h.Log.Warn("sms code: allowance not given back", "err", gerr)
	}
	h.count("retry")
	return &deliveryFailure{msg: out.Err.Error(), wait: out.After}
}

// codeSent records that the gateway took the code's text, so the code
// can be entered. Not under the task's context, and not a reason to send
// again: the text is out. A code replaced or expired meanwhile stays
// unusable (the person entered nothing yet, or asks again).
func (h *SMSSender) codeSent(ctx context.Context, p tasks.SMSCodePayload, sid string) {
	err := h.Store.PhoneCodeSent(context.WithoutCancel(ctx), p.SubscriberID, p.Number, p.Code, sid)
	switch {
	case errors.Is(err, store.ErrNoCode):
		h.Log.Info("sms code: texted, but the code was replaced or ended meanwhile", "subscriber", p.SubscriberID)
	case err != nil:
		h.Log.Error("sms code: texted, but not recorded: the person must ask again", "subscriber", p.SubscriberID, "err", err)
	}
}
