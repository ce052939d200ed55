package listjobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/store"
)

// The job kinds.
const (
	KindBulk   = "bulk"
	KindExport = "export"
)

// The states of a job.
const (
	StateRunning = "running" // queued or being run
	StateDone    = "done"
	StateFailed  = "failed"
)

// How long a job is kept: an export (its CSV is personal data, and its
// download link is the job's id) 24 hours after it was asked for and
// again after it ended; a bulk action's progress a week.
const (
	ExportKeep = 24 * time.Hour
	BulkKeep   = 7 * 24 * time.Hour
)

// ErrNoJob is an unknown or expired job.
var ErrNoJob = errors.New("no such job (unknown, or expired)")

// Job is one bulk action or export and where it stands.
type Job struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	// The selection: a filter (store.Filter).
	Filter store.Filter `json:"filter"`
	// Action and Topic: the bulk action (Actions) and its topic, or its
	// tag for the tag actions (TagAction).
	Action string `json:"action,omitempty"`
	Topic  string `json:"topic,omitempty"`
	// Max caps the people an erasure touches: the count the admin
	// confirmed (0: no cap).
	Max int64 `json:"max,omitempty"`
	// Total is the selection's size when the job was asked for (-1:
	// unknown); Done how many were read, Changed how many the action
	// changed, Skipped how many it left as they were.
	Total   int64 `json:"total"`
	Done    int64 `json:"done"`
	Changed int64 `json:"changed,omitempty"`
	Skipped int64 `json:"skipped,omitempty"`
	// Cursor is where the next run goes on (store.List.Select).
	Cursor string `json:"cursor,omitempty"`
	// Chunks and Bytes: the export's CSV so far; Fields the custom
	// fields it has a column of each (fixed by its first run).
	Chunks int64    `json:"chunks,omitempty"`
	Fields []string `json:"fields,omitempty"`
	Bytes  int64    `json:"bytes,omitempty"`
	// By and Role: who asked (the audit entries' actor).
	By      string    `json:"by"`
	Role    string    `json:"role,omitempty"`
	Created time.Time `json:"created"`
	Ended   time.Time `json:"ended,omitzero"`
	// Error says why a failed job stopped, or why a running one waits for
	// its retry.
	Error string `json:"error,omitempty"`
}

// Jobs keeps the jobs in Redis: a job is one JSON string under
// "{nl:listjob:<id>}", an export's CSV a list of chunks under
// "{nl:listjob:<id>}:csv". The braces make the whole name the hash tag,
// so both sit in one Redis Cluster slot and a chunk and the cursor after
// it are written in one transaction.
type Jobs struct {
	rdb redis.UniversalClient
}

// NewJobs keeps jobs on rdb.
func NewJobs(rdb redis.UniversalClient) *Jobs { return &Jobs{rdb: rdb} }

func jobKey(id string) string    { return "{nl:listjob:" + id + "}" }
func chunksKey(id string) string { return jobKey(id) + ":csv" }

func keep(kind string) time.Duration {
	if kind == KindExport {
		return ExportKeep
	}
	return BulkKeep
}

// Create stores a new job (its ID is made here) and answers it.
func (j *Jobs) Create(ctx context.Context, job Job) (Job, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Job{}, err
	}
	// An unguessable id: it is the export's download link.
	job.ID, job.State = hex.EncodeToString(b[:]), StateRunning
	if err := j.save(ctx, j.rdb, job); err != nil {
		return Job{}, fmt.Errorf("create a %s job: %w", job.Kind, err)
	}
	return job, nil
}

func (j *Jobs) save(ctx context.Context, c redis.Cmdable, job Job) error {
	v, err := json.Marshal(job)
	if err != nil {
		return err
	}
	return c.Set(ctx, jobKey(job.ID), v, keep(job.Kind)).Err()
}

// Get reads a job; ErrNoJob when there is none.
func (j *Jobs) Get(ctx context.Context, id string) (Job, error) {
	v, err := j.rdb.Get(ctx, jobKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Job{}, ErrNoJob
	}
	if err != nil {
		return Job{}, fmt.Errorf("read job %s: %w", id, err)
	}
	var job Job
	if err := json.Unmarshal(v, &job); err != nil {
		return Job{}, fmt.Errorf("read job %s: %w", id, err)
	}
	return job, nil
}

// Save writes where a job stands (its cursor and counts).
func (j *Jobs) Save(ctx context.Context, job Job) error {
	if err := j.save(ctx, j.rdb, job); err != nil {
		return fmt.Errorf("save job %s: %w", job.ID, err)
	}
	return nil
}

// SaveChunk appends an export's chunk and saves the job as it stands
// after it, in one transaction: a retry resumes after the last chunk
// saved, never writing a row twice or losing one.
func (j *Jobs) SaveChunk(ctx context.Context, job Job, chunk []byte) error {
	_, err := j.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(chunk) > 0 {
			p.RPush(ctx, chunksKey(job.ID), chunk)
			p.Expire(ctx, chunksKey(job.ID), ExportKeep)
		}
		return j.save(ctx, p, job)
	})
	if err != nil {
		return fmt.Errorf("save a chunk of export %s: %w", job.ID, err)
	}
	return nil
}

// Chunk reads chunk i of an export's CSV (one at a time: the download's
// memory stays that of a chunk).
func (j *Jobs) Chunk(ctx context.Context, id string, i int64) ([]byte, error) {
	b, err := j.rdb.LIndex(ctx, chunksKey(id), i).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNoJob
	}
	return b, err
}
