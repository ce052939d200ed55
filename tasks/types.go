package tasks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
)

// Task types (SPEC.md).
const (
	TypeConfirmEmail = "email:confirm"
	TypeWelcomeEmail = "email:welcome"
	TypeDigestPlan   = "digest:plan"
	TypeDigestEmail  = "email:digest"
	TypeEvent        = "event:notify"
	TypeEventsEmail  = "email:events"
)

// Queues and their weights. A confirmation is what a person waits for with
// the signup page open, so it has its own lane with the highest weight.
const (
	QueueTransactional = "transactional"
	QueueCritical      = "critical"
	QueueDefault       = "default"
)

// QueueWeights is the asynq Queues map of the worker.
var QueueWeights = map[string]int{QueueTransactional: 10, QueueCritical: 6, QueueDefault: 3}

// ConfirmPayload is the payload of TypeConfirmEmail.
type ConfirmPayload struct {
	Email string `json:"email"`
	// Nonce names this request, so a repeated run of the same task sends
	// once while a later request for a lost mail sends again.
	Nonce string `json:"nonce"`
}

// WelcomePayload is the payload of TypeWelcomeEmail.
type WelcomePayload struct {
	Email string `json:"email"`
}

// Job is a task with its deterministic id and due time: what goes into the
// outbox and then into the queue.
type Job struct {
	Task *asynq.Task
	ID   string
	Due  time.Time
}

// NewConfirm is the confirmation mail for email, due now.
func NewConfirm(email string, now time.Time) Job {
	p, _ := json.Marshal(ConfirmPayload{Email: email, Nonce: newNonce()})
	return confirmJob(p, email, now)
}

func confirmJob(payload []byte, email string, due time.Time) Job {
	id := "confirm:" + email
	return Job{ID: id, Due: due, Task: asynq.NewTask(TypeConfirmEmail, payload,
		asynq.Queue(QueueTransactional), asynq.TaskID(id), asynq.MaxRetry(10), asynq.Timeout(time.Minute))}
}

// NewWelcome is the welcome mail for email, due after delay.
func NewWelcome(email string, now time.Time, delay time.Duration) Job {
	p, _ := json.Marshal(WelcomePayload{Email: email})
	return welcomeJob(p, email, now.Add(delay))
}

func welcomeJob(payload []byte, email string, due time.Time) Job {
	id := WelcomeTaskID(email)
	return Job{ID: id, Due: due, Task: asynq.NewTask(TypeWelcomeEmail, payload,
		asynq.Queue(QueueDefault), asynq.TaskID(id), asynq.MaxRetry(5), asynq.Timeout(2*time.Minute))}
}

// WelcomeTaskID is the id under which email's welcome waits in the queue.
func WelcomeTaskID(email string) string { return "welcome:" + email }

// Options are the enqueue options that place the job at its due time.
func (j Job) Options() []asynq.Option { return []asynq.Option{asynq.ProcessAt(j.Due)} }

type outboxBody struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Outbox is the job's outbox entry.
func (j Job) Outbox() store.OutboxEntry {
	b, _ := json.Marshal(outboxBody{Type: j.Task.Type(), Payload: j.Task.Payload()})
	return store.OutboxEntry{ID: j.ID, Due: j.Due, Body: b}
}

// JobFromOutbox rebuilds the job an outbox entry stands for, with the
// options of its constructor.
func JobFromOutbox(e store.OutboxEntry) (Job, error) {
	var b outboxBody
	if err := json.Unmarshal(e.Body, &b); err != nil {
		return Job{}, fmt.Errorf("decode outbox entry %s: %w", e.ID, err)
	}
	switch b.Type {
	case TypeConfirmEmail:
		var p ConfirmPayload
		if err := json.Unmarshal(b.Payload, &p); err != nil || p.Email == "" {
			return Job{}, fmt.Errorf("decode outbox entry %s: bad confirm payload", e.ID)
		}
		return confirmJob(b.Payload, p.Email, e.Due), nil
	case TypeWelcomeEmail:
		var p WelcomePayload
		if err := json.Unmarshal(b.Payload, &p); err != nil || p.Email == "" {
			return Job{}, fmt.Errorf("decode outbox entry %s: bad welcome payload", e.ID)
		}
		return welcomeJob(b.Payload, p.Email, e.Due), nil
	}
	return Job{}, fmt.Errorf("outbox entry %s: unknown task type %q", e.ID, b.Type)
}

func newNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// decode unmarshals a payload; failure is wrapped in SkipRetry because no
// retry can fix it.
func decode(t *asynq.Task, v any) error {
	if err := json.Unmarshal(t.Payload(), v); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", t.Type(), err, asynq.SkipRetry)
	}
	return nil
}

// errMissing marks a payload without the fields a handler needs.
func errMissing(t *asynq.Task, field string) error {
	return fmt.Errorf("%s payload has no %s: %w", t.Type(), field, asynq.SkipRetry)
}

// DigestPlanPayload is the payload of TypeDigestPlan.
type DigestPlanPayload struct {
	Period string `json:"period"`
}

// DigestBatchPayload is the payload of TypeDigestEmail: up to
// NEWSLETTER_DIGEST_BATCH recipients by id.
type DigestBatchPayload struct {
	Period string  `json:"period"`
	IDs    []int64 `json:"ids"`
}

// EventPayload is the payload of TypeEvent: one notification for one
// subscriber.
type EventPayload struct {
	ID    string    `json:"id"`
	Email string    `json:"email"`
	Title string    `json:"title"`
	URL   string    `json:"url"`
	At    time.Time `json:"at"`
}

// EventsPayload is the payload of TypeEventsEmail: one subscriber's bundle.
type EventsPayload struct {
	Email  string         `json:"email"`
	Events []EventPayload `json:"events"`
}

// Period is the default digest period of t: its ISO week, "2026-W49".
func Period(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%d-W%02d", y, w)
}

// ValidPeriod reports whether p can name a period (and a TaskID part):
// 1 to 64 letters, digits, '-', '_' or '.'.
func ValidPeriod(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// DigestPlanTaskID is the id of a period's plan task: every scheduler
// replica and every manual run of the period meet on it.
func DigestPlanTaskID(period string) string { return "digest:" + period }

// NewDigestPlan is the planning task of period. It runs as long as the
// sending takes (it waits for room in the queue), so its timeout is long;
// it saves its cursor after every page, so a retry resumes.
func NewDigestPlan(period string) *asynq.Task {
	p, _ := json.Marshal(DigestPlanPayload{Period: period})
	return asynq.NewTask(TypeDigestPlan, p, asynq.Queue(QueueCritical), asynq.TaskID(DigestPlanTaskID(period)),
		asynq.MaxRetry(25), asynq.Timeout(30*time.Minute))
}

// NewDigestBatch is a batch of recipients of period, named by its first id
// so a re-planned page is a conflict, not a second batch.
func NewDigestBatch(period string, ids []int64, opts ...asynq.Option) *asynq.Task {
	p, _ := json.Marshal(DigestBatchPayload{Period: period, IDs: ids})
	return asynq.NewTask(TypeDigestEmail, p, append([]asynq.Option{asynq.Queue(QueueCritical),
		asynq.TaskID(fmt.Sprintf("digest:%s:%d", period, ids[0])), asynq.MaxRetry(20), asynq.Timeout(10 * time.Minute)}, opts...)...)
}

// NewEvent is one notification for email, grouped by address so the
// aggregator bundles a person's events into one mail.
func NewEvent(email, title, url string, now time.Time) *asynq.Task {
	p, _ := json.Marshal(EventPayload{ID: newNonce(), Email: email, Title: title, URL: url, At: now.UTC()})
	return asynq.NewTask(TypeEvent, p, asynq.Queue(QueueDefault), asynq.Group(email))
}
