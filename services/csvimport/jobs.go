package csvimport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An import uploaded through the console is a job: its file and its status
// live in Redis, so the worker that runs it (tasks.TypeImportRun), any
// API replica that shows it, and a worker that takes it over after a
// restart all see the same.
const (
	prefixJob = "nl:import:" // + id: hash of the status (below)
	// JobKeep is how long a job's status is kept; its file goes when it ends.
	JobKeep = 7 * 24 * time.Hour
)

// dataKey is where a job's uploaded file is kept: "{nl:import:<id>}:data",
// whose hash tag is the whole status key, so on a Redis Cluster both sit in
// one slot (a key without braces hashes whole) and the steps that write
// or drop them together (Create's transaction, Finish's script, Delete)
// are not refused as CROSSSLOT. The status key keeps its name.
func dataKey(id string) string { return "{" + prefixJob + id + "}:data" }

// olderDataKey is where the release before kept the file ("nl:import:<id>:data",
// a slot of its own on a cluster): a job it created is read from there.
// Nothing deletes it; it expires JobKeep after the upload, as it always did.
func olderDataKey(id string) string { return prefixJob + id + ":data" }

// The states of a job.
const (
	// StateMapping is an upload waiting for its mapping to be confirmed
	// (Stage, then Confirm): nothing is read yet.
	StateMapping = "mapping"
	StateRunning = "running" // queued or being read
	StateDone    = "done"
	StateFailed  = "failed"
)

// ErrNoJob is an unknown (or expired) import.
var ErrNoJob = errors.New("no such import")

// Job is what an upload says about itself.
type Job struct {
	File    string `json:"file"`
	Size    int64  `json:"size"`
	Pending bool   `json:"pending"`
	// By and Role are who uploaded it (the audit entry's actor).
	By   string `json:"by"`
	Role string `json:"-"`
	// Lines is the file's line count (CountLines), checked against the
	// lines read.
	Lines int64 `json:"lines"`
	// Mapping is what each column is, once confirmed (nil: recognised
	// from the header row as it is read).
	Mapping *Mapping `json:"mapping,omitempty"`
}

// Status is one import as GET /api/imports/{id} and the console show it.
type Status struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Job
	Progress
	// RejectedTotal is how many lines were rejected, listed or not.
	RejectedTotal int64 `json:"rejected_total"`
	// Error says why a failed import stopped, or why a running one is
	// being retried.
	Error string `json:"error,omitempty"`
}

// Jobs keeps the console's imports in Redis.
type Jobs struct {
	rdb redis.UniversalClient
}

// NewJobs keeps jobs on rdb.
func NewJobs(rdb redis.UniversalClient) *Jobs { return &Jobs{rdb: rdb} }

// NewJobID is a fresh, unguessable job id.
func NewJobID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// Create stores a new job and its file, running from line 0.
func (j *Jobs) Create(ctx context.Context, id string, job Job, data []byte) error {
	return j.create(ctx, id, StateRunning, job, data)
}

// Stage stores a new job and its file waiting for its mapping (Confirm).
func (j *Jobs) Stage(ctx context.Context, id string, job Job, data []byte) error {
	return j.create(ctx, id, StateMapping, job, data)
}

// Confirm saves a staged job's mapping and makes it running (its task is
// the caller's to queue); false when it was not waiting (confirmed
// before).
func (j *Jobs) Confirm(ctx context.Context, id string, m Mapping) (bool, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("encode the mapping: %w", err)
	}
	n, err := confirmScript.Run(ctx, j.rdb, []string{prefixJob + id}, StateMapping, StateRunning, string(b)).Int()
	return n == 1, wrap("confirm the import", err)
}

// Unconfirm puts a confirmed job back to waiting for its mapping (its
// task could not be queued).
func (j *Jobs) Unconfirm(ctx context.Context, id string) error {
	_, err := confirmScript.Run(ctx, j.rdb, []string{prefixJob + id}, StateRunning, StateMapping, "").Int()
	return wrap("put the import back", err)
}

// confirmScript moves a job from state ARGV[1] to ARGV[2] with the
// mapping ARGV[3]; 0 when it was not in ARGV[1].
var confirmScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'mapping', ARGV[3])
return 1`)

func (j *Jobs) create(ctx context.Context, id, state string, job Job, data []byte) error {
	key := prefixJob + id
	_, err := j.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "state", state, "file", job.File, "size", job.Size, "pending", strconv.FormatBool(job.Pending),
			"by", job.By, "role", job.Role, "lines", job.Lines, "progress", mustProgress(Progress{}), "error", "")
		p.Expire(ctx, key, JobKeep)
		p.Set(ctx, dataKey(id), data, JobKeep)
		return nil
	})
	return wrap("store the import", err)
}

// Delete removes a job that never started (its task could not be queued).
func (j *Jobs) Delete(ctx context.Context, id string) error {
	return wrap("delete the import", j.rdb.Del(ctx, prefixJob+id, dataKey(id)).Err())
}

// Status reads a job, ErrNoJob when there is none.
func (j *Jobs) Status(ctx context.Context, id string) (Status, error) {
	m, err := j.rdb.HGetAll(ctx, prefixJob+id).Result()
	if err != nil {
		return Status{}, wrap("read the import", err)
	}
	if len(m) == 0 {
		return Status{}, ErrNoJob
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(m[k], 10, 64); return v }
	s := Status{ID: id, State: m["state"], Error: m["error"], Job: Job{File: m["file"], Size: n("size"), Pending: m["pending"] == "true",
		By: m["by"], Role: m["role"], Lines: n("lines")}}
	if m["mapping"] != "" {
		s.Mapping = &Mapping{}
		if err := json.Unmarshal([]byte(m["mapping"]), s.Mapping); err != nil {
			return Status{}, fmt.Errorf("import %s: its mapping is unreadable: %w", id, err)
		}
	}
	if err := json.Unmarshal([]byte(m["progress"]), &s.Progress); err != nil {
		return Status{}, fmt.Errorf("import %s: its progress is unreadable: %w", id, err)
	}
	s.Progress = s.Progress.clone() // rejected is a list, never null
	s.RejectedTotal = s.Progress.RejectedTotal()
	return s, nil
}

// Data is the job's file (ErrNoJob once it is gone).
func (j *Jobs) Data(ctx context.Context, id string) ([]byte, error) {
	b, err := j.rdb.Get(ctx, dataKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		// A job the release before created, taken over by this one.
		b, err = j.rdb.Get(ctx, olderDataKey(id)).Bytes()
	}
	if errors.Is(err, redis.Nil) {
		return nil, ErrNoJob
	}
	return b, wrap("read the import's file", err)
}

// Checkpoint saves p while the job runs (a job that ended keeps its end).
func (j *Jobs) Checkpoint(ctx context.Context, id string, p Progress, problem string) error {
	_, err := whileRunning.Run(ctx, j.rdb, []string{prefixJob + id}, StateRunning, mustProgress(p), problem).Int()
	return wrap("save the import's checkpoint", err)
}

// Finish ends the job as state (StateDone, StateFailed) with p and
// problem, and drops its file. ended is false when it had ended before
// (a task run again after its end was saved): its audit entry is written
// once, by the run that ended it.
func (j *Jobs) Finish(ctx context.Context, id string, p Progress, state, problem string) (ended bool, err error) {
	n, err := whileRunning.Run(ctx, j.rdb, []string{prefixJob + id, dataKey(id)}, state, mustProgress(p), problem).Int()
	return n == 1, wrap("save the import's end", err)
}

// whileRunning writes a running job's progress and state (ARGV), and
// drops its file (KEYS[2]) when the state is an end; 0 when it was not
// running.
var whileRunning = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'progress', ARGV[2], 'error', ARGV[3])
if KEYS[2] then redis.call('DEL', KEYS[2]) end
return 1`)

func mustProgress(p Progress) string {
	b, err := json.Marshal(p.clone())
	if err != nil {
		panic(fmt.Sprintf("csvimport: encode progress: %v", err)) // plain numbers and strings
	}
	return string(b)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
