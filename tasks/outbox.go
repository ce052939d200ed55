package tasks

import (
	"encoding/json"
	"fmt"

	"github.com/newsletter/newsletter/internal/outbox"
)

// The outbox codec: a job is written to the store's outbox in the same step
// as the state change that calls for it, and rebuilt from there by the
// relay with the options of its constructor.

type outboxBody struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Outbox is the job's outbox entry.
func (j Job) Outbox() outbox.Entry {
	return outbox.Entry{ID: j.ID, Due: j.Due, Body: mustJSON(outboxBody{Type: j.Task.Type(), Payload: j.Task.Payload()})}
}

// JobFromOutbox rebuilds the job an outbox entry stands for.
func JobFromOutbox(e outbox.Entry) (Job, error) {
	var b outboxBody
	if err := json.Unmarshal(e.Body, &b); err != nil {
		return Job{}, fmt.Errorf("decode outbox entry %s: %w", e.ID, err)
	}
	k, ok := kinds[b.Type]
	if !ok {
		return Job{}, fmt.Errorf("outbox entry %s: unknown task type %q", e.ID, b.Type)
	}
	if k.job == nil {
		return Job{}, fmt.Errorf("outbox entry %s: task type %q has no TaskID, so it never goes through the outbox", e.ID, b.Type)
	}
	j, err := k.job(b.Payload, e.Due)
	if err != nil {
		return Job{}, fmt.Errorf("decode outbox entry %s: %w", e.ID, err)
	}
	return j, nil
}
