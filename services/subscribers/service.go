package subscribers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Store is what the Service needs of the store (store.Redis): the
// people, the list's selections, their tags and fields.
type Store interface {
	store.Subscribers
	store.List
	store.People
	store.Tags
	store.Fields
}

// TaskDeleter removes a waiting task (*asynq.Inspector).
type TaskDeleter interface {
	DeleteTask(queue, id string) error
}

// Service is the list's changes made by a publisher or by the person
// themselves: adding, changing, setting topics, ending, exporting and
// erasing one person, and the bulk actions and CSV exports. The API's
// routes and the console's forms call the same Service (the binary
// builds one and hands it to both), so a change is the same from either
// door: the same checks, messages, tasks, webhooks and audit entries.
type Service struct {
	Store Store
	// Topics are the topics and the onboarding sequence in effect.
	Topics topics.Source
	// Jobs dispatch a mail with its outbox entry (*tasks.Dispatcher);
	// Queue enqueues the tasks that have none (*asynq.Client).
	Jobs  tasks.JobDispatcher
	Queue tasks.Enqueuer
	// Tasks deletes the waiting tasks of a person who left (nil: their
	// handlers' re-check skips them).
	Tasks TaskDeleter
	// Notify queues the webhook events of the changes (nil-safe).
	Notify *webhooks.Notifier
	// Audit records the changes (nil: none, for tests of other things).
	Audit *audit.Trail
	// ListJobs keep the bulk actions and exports (nil: those on a filter
	// answer 503).
	ListJobs *listjobs.Jobs
	// Channels are what the channels added through the seam keep of a
	// person, for the person's export and erase.
	Channels []PersonData
	Log      *slog.Logger
	Now      func() time.Time
}

// PersonData is what a channel added through the seam keeps of a person
// (the binary adapts a channels.Exporter and channels.Eraser to it).
type PersonData interface {
	Name() string
	// Export answers the person's data as a JSON value (nil: none).
	Export(ctx context.Context, id int64, email string) (any, error)
	// Erase forgets the person.
	Erase(ctx context.Context, id int64, email string) error
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Service) topics() *topics.Set { return s.Topics.Current() }

func bad(format string, a ...any) error {
	return &ListError{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, a...)}
}

func errorBody(msg string) map[string]string { return map[string]string{"error": msg} }

// AnswerError answers err of the list's work as JSON: a ListError as it
// says, a bad query 400, nobody 404, a store failure 503 (logged as
// what's, which the message names). The API answers its list routes
// through it, as the export's download here does.
func (s *Service) AnswerError(w http.ResponseWriter, what string, err error) {
	var le *ListError
	switch {
	case errors.As(err, &le):
		webjson.Write(w, le.Code, errorBody(le.Msg))
	case errors.Is(err, store.ErrBadQuery):
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
	case errors.Is(err, store.ErrNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no such subscriber"))
	default:
		s.log().Error(what+": store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(what+": the store cannot be reached just now; trying again is safe"))
	}
}

// note records a change by the principal in ctx; a failed write is
// logged whole and counted by the Trail (the change is made and stays).
func (s *Service) note(ctx context.Context, action, target, detail string) {
	if s.Audit == nil {
		return
	}
	_ = s.Audit.Note(ctx, audit.Entry{Action: action, Target: target, Detail: detail}) // logged and counted by the Trail
}

// noteSubscriber is note of a change to the person with address email:
// the target is the address's keyed hash, never the address.
func (s *Service) noteSubscriber(ctx context.Context, action, email, detail string) {
	if s.Audit == nil {
		return
	}
	s.note(ctx, action, s.Audit.Subscriber(email), detail)
}

// DispatchSignup enqueues a signup's first mail; one that fails is the
// relay's to send from the outbox.
func (s *Service) DispatchSignup(ctx context.Context, job tasks.Job) {
	dup, err := s.Jobs.Dispatch(ctx, job)
	switch {
	case err != nil:
		s.log().Warn("subscribe: enqueue failed, the relay will retry", "task", job.ID, "err", err)
	case dup:
		s.log().Info("subscribe: task already queued", "task", job.ID)
	}
}

// FirstStep is the sequence's first step for email, confirmed now.
func (s *Service) FirstStep(email string, now time.Time) tasks.Job {
	return tasks.NewWelcome(email, now, s.topics().Sequence.Steps[0].After)
}

// DeleteTasks deletes waiting tasks of a person who left. DeleteTask
// fails on a running task; its handler's re-check skips it.
func (s *Service) DeleteTasks(refs []tasks.TaskRef) {
	if s.Tasks == nil {
		return
	}
	for _, p := range refs {
		if err := s.Tasks.DeleteTask(p.Queue, p.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			s.log().Info("unsubscribe: task not deleted, the handler's re-check will skip it", "queue", p.Queue, "err", err)
		}
	}
}
