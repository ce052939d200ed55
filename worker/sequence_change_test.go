package worker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
)

// switching is the catalog saved in the middle of a task: the first read
// sees old, every later one new.
type switching struct {
	old, new *topics.Set
	n        atomic.Int32
}

func (s *switching) Current() *topics.Set {
	if s.n.Add(1) == 1 {
		return s.old
	}
	return s.new
}

// A step's task that reads the sequence before a change in the console
// schedules the next step of the sequence it read (the realign at the
// change puts the new one right): an index of one sequence is never
// applied to another (that scheduled nothing, or the wrong step).
func TestStepIndexAcrossCatalogChange(t *testing.T) {
	old := sequenceSet(t, threeSteps)
	e := newSequenceEnv(t, old, nil)
	e.now = confirmed.Add(time.Hour)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	e.queue.take()
	e.now = confirmed.Add(72 * time.Hour)
	src := &switching{old: old, new: sequenceSet(t, "  - {template: welcome, after: 1h}\n  - {template: best-of, after: 168h}\n")}
	e.h.Sequence.Links.Topics = src
	if err := e.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
}
