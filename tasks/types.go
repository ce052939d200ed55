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
