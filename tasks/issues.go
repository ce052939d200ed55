package tasks

import (
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// An issue is sent the digest's way: one plan task walks the audience and
// enqueues batches; each batch claims a delivery mark per (issue,
// subscriber). Each resume plans again in a new round (its own task ids),
// and the marks skip whoever already got it.

// IssuePlanPayload is the payload of TypeIssuePlan.
type IssuePlanPayload struct {
	IssueID int64 `json:"issue_id"`
	Round   int   `json:"round"`
}

// IssueBatchPayload is the payload of TypeIssueEmail.
type IssueBatchPayload struct {
	IssueID int64   `json:"issue_id"`
	Round   int     `json:"round"`
	IDs     []int64 `json:"ids"`
}

// IssuePlanTaskID is the id of an issue's plan task (round 1:
// "issue:<id>"; a resume's: "issue:<id>:r<round>").
func IssuePlanTaskID(id int64, round int) string {
	if round <= 1 {
		return fmt.Sprintf("issue:%d", id)
	}
	return fmt.Sprintf("issue:%d:r%d", id, round)
}

// IssueBatchTaskID names a batch by its first recipient ("issue:<id>:<first
// subscriber id>" in round 1), so a re-planned page is a conflict.
func IssueBatchTaskID(id int64, round int, firstID int64) string {
	if round <= 1 {
		return fmt.Sprintf("issue:%d:%d", id, firstID)
	}
	return fmt.Sprintf("issue:%d:r%d:%d", id, round, firstID)
}

// NewIssuePlan is the planning job of an issue's round, due at due (the
// send time; now or past: at once). It goes through the outbox, written
// with the status change that calls for it, so a crash between the two
// cannot leave an issue "sending" with nobody planning it.
func NewIssuePlan(id int64, round int, due time.Time) Job {
	return IssuePlan.Job(IssuePlanPayload{IssueID: id, Round: round}, due)
}

// NewIssueBatch is a batch of an issue's recipients due at due (now, a
// reader's local hour, or the end of quiet hours); the time is part of
// its id when it is not now, so the parts of one page held to different
// times are different tasks.
func NewIssueBatch(id int64, round int, ids []int64, due time.Time, held bool) *asynq.Task {
	p := IssueBatchPayload{IssueID: id, Round: round, IDs: ids}
	opts := []asynq.Option{asynq.ProcessAt(due)}
	if held {
		opts = append(opts, asynq.TaskID(fmt.Sprintf("%s:t%d", IssueEmail.ID(p), due.Unix())))
	}
	return IssueEmail.New(p, opts...)
}
