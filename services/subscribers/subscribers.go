// Package subscribers is what the API, the console and the commands share
// about the people on the list: the Service that changes it (the binary
// builds one for the API and the console), the shapes of adding, changing
// and bulk actions, the errors the list answers with, the queries of its
// pages and a person's export.
package subscribers

import (
	"fmt"

	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
)

const MaxReason = 500

const MaxBulkEmails = 1000

// ListError is a request the list refuses: its HTTP status and message.
type ListError struct {
	Code int
	Msg  string
}

func (e *ListError) Error() string { return e.Msg }

// AddInput is POST /api/subscribers' body (and the console's add form).
type AddInput struct {
	Email       string      `json:"email"`
	Name        string      `json:"name"`
	Timezone    string      `json:"timezone"`
	Topics      *[]string   `json:"topics"`
	Tags        []string    `json:"tags"`
	Fields      FieldValues `json:"fields"`
	DoubleOptIn bool        `json:"double_optin"`
	Reason      string      `json:"reason"`
}

// ChangeInput is PATCH /api/subscribers/{email}'s body: a field left out
// stays as it is. Tags replace the person's; fields are merged into
// theirs ("" clears one).
type ChangeInput struct {
	Name     *string     `json:"name"`
	Timezone *string     `json:"timezone"`
	Topics   *[]string   `json:"topics"`
	Tags     *[]string   `json:"tags"`
	Fields   FieldValues `json:"fields"`
}

// MaxEraseCount is the largest selection whose exact size an erasure
// counts by reading it (a search narrowed by status or topic, which the
// indexes cannot count): a larger one must be narrowed.
const MaxEraseCount = 100000

// BulkInput is POST /api/subscribers/bulk's body: a filter or a list of
// addresses, the action, its topic, and for an erasure the count
// confirmed.
type BulkInput struct {
	Filter  *store.Filter `json:"filter"`
	Emails  []string      `json:"emails"`
	Action  string        `json:"action"`
	Topic   string        `json:"topic"`
	Tag     string        `json:"tag"`
	Confirm *int64        `json:"confirm"`
}

// BulkResult is what a bulk action answers: done at once (a list of
// addresses), or the job that runs it (a filter).
type BulkResult struct {
	Action  string `json:"action"`
	Count   int64  `json:"count"`
	Changed int64  `json:"changed"`
	Skipped int64  `json:"skipped"`
	// NotFound are the addresses given that are not on the list.
	NotFound []string      `json:"not_found,omitempty"`
	Job      *listjobs.Job `json:"job,omitempty"`
}

// ConfirmError: an erasure not yet confirmed with its count.
type ConfirmError struct{ Count int64 }

func (e *ConfirmError) Error() string {
	return fmt.Sprintf("erasing %d people cannot be undone: send the same request again with \"confirm\": %d", e.Count, e.Count)
}

// TopicsError is a list of topics the topics file does not allow.
type TopicsError struct{ Err error }

func (e *TopicsError) Error() string { return e.Err.Error() }

func (e *TopicsError) Unwrap() error { return e.Err }
