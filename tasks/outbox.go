package tasks

import (
	"encoding/json"
	"fmt"

	"github.com/newsletter/newsletter/store"
)

// The outbox codec: a job is written to the store's outbox in the same step
// as the state change that calls for it, and rebuilt from there by the
// relay with the options of its constructor.

type outboxBody struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Outbox is the job's outbox entry.
func (j Job) Outbox() store.OutboxEntry {
	return store.OutboxEntry{ID: j.ID, Due: j.Due, Body: mustJSON(outboxBody{Type: j.Task.Type(), Payload: j.Task.Payload()})}
}

// JobFromOutbox rebuilds the job an outbox entry stands for.
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
	case TypeIssuePlan:
		var p IssuePlanPayload
		if err := json.Unmarshal(b.Payload, &p); err != nil || p.IssueID <= 0 {
			return Job{}, fmt.Errorf("decode outbox entry %s: bad issue plan payload", e.ID)
		}
		return issuePlanJob(b.Payload, p.IssueID, p.Round, e.Due), nil
	}
	return Job{}, fmt.Errorf("outbox entry %s: unknown task type %q", e.ID, b.Type)
}
