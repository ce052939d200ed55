package tasks

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Kind binds a task type to its payload, its queue and its retry and time
// budget: one value per task type, declared beside its payload and
// constructors (kinds.go lists them). Everything that places or reads a
// task goes through its kind: the constructors (Kind.New), the outbox
// codec (Kind.ID), the queue table (QueueOf), the metrics' list of types
// (HandledTypes) and the worker, which registers one handler per kind
// and gets the payload decoded and checked (worker.on).
//
// Adding a task type is two steps: a file here with its payload, its kind
// and a constructor; and one registration of its handler in the worker
// (tasks/worker/routes.go).
type Kind[P any] struct {
	Type  string
	Queue string
	// MaxRetry and Timeout are asynq's (0: asynq's default, 25 retries
	// and 30 minutes; a kind cannot ask for no retry); Retention keeps a
	// finished task (and so its TaskID) that long (0: not kept).
	MaxRetry  int
	Timeout   time.Duration
	Retention time.Duration
	// ID is the TaskID of a payload (nil: asynq picks one). A constructor
	// whose id depends on more than the payload passes asynq.TaskID
	// itself; ID is what the outbox rebuilds a job with.
	ID func(P) string
	// Check says whether a payload read back names what the task needs
	// (nil: any). A handler never sees one that fails it: the task is
	// dropped without a retry, as an unreadable one is.
	Check func(P) error
	// Grouped kinds are bundled by the e-mail lane's aggregator, never run
	// on their own (and are not among HandledTypes).
	Grouped bool
}

// New is a task of this kind carrying p, with the kind's options; opts
// come after them and so may override them (a held batch's own TaskID, a
// due time).
func (k Kind[P]) New(p P, opts ...asynq.Option) *asynq.Task {
	return asynq.NewTask(k.Type, mustJSON(p), append(k.options(p), opts...)...)
}

// options are the kind's asynq options for a task carrying p.
func (k Kind[P]) options(p P) []asynq.Option {
	base := []asynq.Option{asynq.Queue(k.Queue)}
	if k.MaxRetry > 0 {
		base = append(base, asynq.MaxRetry(k.MaxRetry))
	}
	if k.Timeout > 0 {
		base = append(base, asynq.Timeout(k.Timeout))
	}
	if k.Retention > 0 {
		base = append(base, asynq.Retention(k.Retention))
	}
	if k.ID != nil {
		if id := k.ID(p); id != "" {
			base = append(base, asynq.TaskID(id))
		}
	}
	return base
}

// Job is p as an outbox job due at due, under the kind's TaskID.
func (k Kind[P]) Job(p P, due time.Time) Job {
	return Job{ID: k.ID(p), Due: due, Task: k.New(p)}
}

// Decode reads a payload of this kind and checks it. Its error says which
// kind and why; the worker makes it a SkipRetry.
func (k Kind[P]) Decode(payload []byte) (P, error) {
	var p P
	if err := json.Unmarshal(payload, &p); err != nil {
		return p, fmt.Errorf("decode %s payload: %v", k.Type, err)
	}
	if k.Check != nil {
		if err := k.Check(p); err != nil {
			return p, fmt.Errorf("%s payload: %v", k.Type, err)
		}
	}
	return p, nil
}

// kindInfo is what the package keeps of each kind, by type.
type kindInfo struct {
	queue   string
	grouped bool
	// job rebuilds an outbox entry's job (nil: the kind has no TaskID,
	// so it never goes through the outbox).
	job func(payload []byte, due time.Time) (Job, error)
}

var (
	kinds     = map[string]kindInfo{}
	kindOrder []string
)

// define records k (kinds.go declares every kind with it) and returns it.
func define[P any](k Kind[P]) Kind[P] {
	if _, dup := kinds[k.Type]; dup {
		panic("tasks: kind " + k.Type + " defined twice")
	}
	info := kindInfo{queue: k.Queue, grouped: k.Grouped}
	if k.ID != nil {
		// The outbox's bytes are the task's payload as written: decoded
		// only to check them and to name the task, so nothing a later
		// version added to the payload is lost on the way.
		info.job = func(payload []byte, due time.Time) (Job, error) {
			p, err := k.Decode(payload)
			if err != nil {
				return Job{}, err
			}
			return Job{ID: k.ID(p), Due: due, Task: asynq.NewTask(k.Type, payload, k.options(p)...)}, nil
		}
	}
	kinds[k.Type] = info
	kindOrder = append(kindOrder, k.Type)
	return k
}

// QueueOf is the queue a task of type typ runs in ("" for an unknown type).
func QueueOf(typ string) string { return kinds[typ].queue }

// HandledTypes are the task types the worker runs (grouped ones are
// bundled, not run), in the order kinds.go declares them: for metrics
// that list them ahead of the first task.
func HandledTypes() []string {
	var types []string
	for _, typ := range kindOrder {
		if !kinds[typ].grouped {
			types = append(types, typ)
		}
	}
	return types
}
