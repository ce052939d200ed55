package csvimport

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// TestJobsOnCluster runs a job's life on a real Redis Cluster: its file
// and its status are written together (a transaction), ended together (a
// script) and deleted together, which a cluster refuses as CROSSSLOT
// unless both keys are in one slot. A job the release before stored
// (its file under the older key) is still read.
func TestJobsOnCluster(t *testing.T) {
	c := rediscluster.Start(t)
	ctx := context.Background()
	j := NewJobs(c.Client(t))

	id := NewJobID()
	file := []byte("email\na@example.com\n")
	if err := j.Create(ctx, id, Job{File: "a.csv", Size: int64(len(file)), By: "ops", Role: "admin", Lines: 2}, file); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Data(ctx, id); err != nil || !bytes.Equal(got, file) {
		t.Fatalf("data %q %v", got, err)
	}
	if err := j.Checkpoint(ctx, id, Progress{}, ""); err != nil {
		t.Fatal(err)
	}
	if ended, err := j.Finish(ctx, id, Progress{}, StateDone, ""); err != nil || !ended {
		t.Fatalf("finish: %v %v", ended, err)
	}
	if ended, err := j.Finish(ctx, id, Progress{}, StateDone, ""); err != nil || ended {
		t.Fatalf("finish again: %v %v, want no second end", ended, err)
	}
	if st, err := j.Status(ctx, id); err != nil || st.State != StateDone {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := j.Data(ctx, id); !errors.Is(err, ErrNoJob) {
		t.Fatalf("the file after the end: %v, want ErrNoJob", err)
	}

	gone := NewJobID()
	if err := j.Create(ctx, gone, Job{File: "b.csv"}, file); err != nil {
		t.Fatal(err)
	}
	if err := j.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Status(ctx, gone); !errors.Is(err, ErrNoJob) {
		t.Fatalf("status after delete: %v", err)
	}
	if _, err := j.Data(ctx, gone); !errors.Is(err, ErrNoJob) {
		t.Fatalf("file after delete: %v", err)
	}

	older := NewJobID()
	if err := c.Client(t).Set(ctx, olderDataKey(older), file, JobKeep).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Data(ctx, older); err != nil || !bytes.Equal(got, file) {
		t.Fatalf("an earlier release's file: %q %v", got, err)
	}
}
