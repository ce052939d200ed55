// Package outbox is the shape of an outbox entry: a task written in the
// same atomic step as the state change that calls for it, and removed
// once the task is enqueued; a relay enqueues entries left behind by a
// crash. The store keeps the entries and the task vocabulary (tasks)
// encodes them; the shape lives in this leaf so that neither of the two
// imports the other.
package outbox

import "time"

// Entry is a task that must reach the queue. The store treats Body as
// opaque bytes; tasks.Job.Outbox and tasks.JobFromOutbox are its codec.
type Entry struct {
	ID   string    // the task's deterministic TaskID
	Due  time.Time // when the task should run
	Body []byte    // the encoded task
}

// Cancel names the outbox entries of a sequence: dropped, in the same
// step, when a change leaves the subscriber without Topic (or any topic).
type Cancel struct {
	Topic  string
	Outbox []string
}
