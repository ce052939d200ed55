package memstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/store"
)

// issueRec is one issue with its versions and plan state.
type issueRec struct {
	is       store.Issue
	versions []store.IssueContent
	prog     store.IssueProgress
}

func (m *Memory) issueLocked(id int64) (*issueRec, error) {
	r, ok := m.issues[id]
	if !ok {
		return nil, store.ErrNoIssue
	}
	return r, nil
}

func cloneIssue(is store.Issue) store.Issue {
	is.Topics = slices.Clone(is.Topics)
	if is.Topics == nil {
		is.Topics = []string{}
	}
	return is
}

// CreateIssue implements store.Issues.
func (m *Memory) CreateIssue(_ context.Context, c store.IssueContent, slug string) (store.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slug == "" {
		slug = store.Slugify(c.Subject)
	}
	return cloneIssue(m.createIssueLocked(c, slug)), nil
}

func (m *Memory) createIssueLocked(c store.IssueContent, slug string) store.Issue {
	want := slug
	for n := 2; m.slugs[slug] != 0; n++ {
		slug = want + "-" + strconv.Itoa(n)
	}
	m.issueSeq++
	now := m.now().UTC().Truncate(time.Millisecond)
	c.Topics = slices.Clone(c.Topics)
	is := store.Issue{ID: m.issueSeq, Slug: slug, IssueContent: c, Status: store.IssueDraft, Version: 1, Round: 1, CreatedAt: now, UpdatedAt: now}
	m.issues[is.ID] = &issueRec{is: is, prog: store.IssueProgress{Round: 1}}
	m.slugs[slug] = is.ID
	return is
}

// DigestIssue implements store.Issues.
func (m *Memory) DigestIssue(ctx context.Context, period string, c store.IssueContent) (store.Issue, error) {
	m.mu.Lock()
	run, ok := m.runs[period]
	if !ok {
		m.mu.Unlock()
		return store.Issue{}, store.ErrNoRun
	}
	if run.Issue == 0 {
		run.Issue = m.createIssueLocked(c, store.DigestIssueSlug(period)).ID
		m.issues[run.Issue].is.Period = period
	}
	id := run.Issue
	m.mu.Unlock()
	return m.Issue(ctx, id)
}

// UpdateIssue implements store.Issues.
func (m *Memory) UpdateIssue(_ context.Context, id int64, version int, c store.IssueContent) (store.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return store.Issue{}, err
	}
	if !store.Editable(r.is.Status) {
		return store.Issue{}, &store.StateError{ID: id, Status: r.is.Status}
	}
	if r.is.Version != version {
		return store.Issue{}, fmt.Errorf("issue %d: %w", id, store.ErrIssueStale)
	}
	r.versions = append(r.versions, r.is.IssueContent)
	c.Topics = slices.Clone(c.Topics)
	r.is.IssueContent, r.is.UpdatedAt = c, m.now().UTC().Truncate(time.Millisecond)
	r.is.Version++
	return cloneIssue(r.is), nil
}

// Issue implements store.Issues.
func (m *Memory) Issue(_ context.Context, id int64) (store.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return store.Issue{}, err
	}
	return cloneIssue(r.is), nil
}

// IssueStatus implements store.Issues.
func (m *Memory) IssueStatus(_ context.Context, id int64) (store.IssueStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return store.IssueStatus{}, err
	}
	return store.IssueStatus{Status: r.is.Status, Round: r.is.Round, Version: r.is.Version}, nil
}

// IssueBySlug implements store.Issues.
func (m *Memory) IssueBySlug(ctx context.Context, slug string) (store.Issue, error) {
	m.mu.Lock()
	id := m.slugs[slug]
	m.mu.Unlock()
	return m.Issue(ctx, id)
}

// IssueVersions implements store.Issues.
func (m *Memory) IssueVersions(_ context.Context, id int64) ([]store.IssueContent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.versions), nil
}

func (m *Memory) listIssues(after int64, limit int, keep func(store.Issue) bool) []store.Issue {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []store.Issue{}
	for id := m.issueSeq; id > 0 && len(out) < limit; id-- {
		r, ok := m.issues[id]
		if !ok || (after > 0 && id >= after) || !keep(r.is) {
			continue
		}
		out = append(out, cloneIssue(r.is))
	}
	return out
}

// ListIssues implements store.Issues.
func (m *Memory) ListIssues(_ context.Context, status string, after int64, limit int) ([]store.Issue, error) {
	return m.listIssues(after, limit, func(is store.Issue) bool { return status == "" || is.Status == status }), nil
}

// SentIssues implements store.Issues.
func (m *Memory) SentIssues(_ context.Context, topic string, after int64, limit int) ([]store.Issue, error) {
	return m.listIssues(after, limit, func(is store.Issue) bool {
		return is.Status == store.IssueSent && (topic == "" || slices.Contains(is.Topics, topic))
	}), nil
}

// TransitionIssue implements store.Issues.
func (m *Memory) TransitionIssue(_ context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return store.Issue{}, err
	}
	if !slices.Contains(from, r.is.Status) {
		return store.Issue{}, &store.StateError{ID: id, Status: r.is.Status}
	}
	if (ch.Round > 0 && ch.Round != r.is.Round) || (ch.Version > 0 && ch.Version != r.is.Version) {
		return store.Issue{}, fmt.Errorf("issue %d: %w", id, store.ErrIssueStale)
	}
	r.is.PausedFrom = ""
	if to == store.IssuePaused {
		r.is.PausedFrom = r.is.Status
	}
	r.is.Status = to
	if ch.SetSchedule {
		r.is.SendAt, r.is.LocalTime = ch.SendAt.UTC(), ch.LocalTime
		if ch.SendAt.IsZero() {
			r.is.SendAt = time.Time{}
		}
	}
	if to == store.IssueSent {
		r.is.SentAt = m.now().UTC().Truncate(time.Millisecond)
	}
	if ch.NewRound {
		r.is.Round++
		r.prog.Round, r.prog.Cursor, r.prog.PlanDone = r.is.Round, 0, false
	}
	if ch.Outbox.ID != "" {
		m.outbox[ch.Outbox.ID] = ch.Outbox
	}
	return cloneIssue(r.is), nil
}

func (m *Memory) issueCounts(id int64) (sent, skipped, failed int64) {
	key := strconv.FormatInt(id, 10)
	for mk := range m.sent {
		if mk.Kind == store.IssueMarkKind && mk.Key == key {
			sent++
		}
	}
	o := store.IssueOutcomeKey(id)
	return sent, int64(len(m.outcomes[o+":"+store.OutcomeSkipped])), int64(len(m.outcomes[o+":"+store.OutcomeFailed]))
}

// IssueProgress implements store.Issues.
func (m *Memory) IssueProgress(_ context.Context, id int64) (store.IssueProgress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return store.IssueProgress{}, err
	}
	return m.progressLocked(r), nil
}

func (m *Memory) progressLocked(r *issueRec) store.IssueProgress {
	p := r.prog
	p.Status, p.Round = r.is.Status, r.is.Round
	p.Sent, p.Skipped, p.Failed = m.issueCounts(r.is.ID)
	return p
}

// AdvanceIssuePlan implements store.Issues.
func (m *Memory) AdvanceIssuePlan(_ context.Context, id int64, round int, cursor int64, n int, done bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return err
	}
	if r.is.Round != round {
		return nil
	}
	if cursor > r.prog.Cursor { // a page not past the cursor was counted
		r.prog.Cursor, r.prog.Planned = cursor, r.prog.Planned+int64(n)
		r.prog.MaxCursor = max(r.prog.MaxCursor, cursor)
	}
	if done {
		r.prog.PlanDone = true
	}
	return nil
}

// IssueAudience implements store.Issues.
func (m *Memory) IssueAudience(_ context.Context, topicIDs []string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, s := range m.byID {
		if s.Status == store.Active && slices.ContainsFunc(topicIDs, func(t string) bool { return slices.Contains(s.Topics, t) }) {
			n++
		}
	}
	return n, nil
}

// FinishIssue implements store.Issues.
func (m *Memory) FinishIssue(_ context.Context, id int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.issueLocked(id)
	if err != nil {
		return false, err
	}
	sent, skipped, failed := m.issueCounts(id)
	if r.is.Status != store.IssueSending || !r.prog.PlanDone || sent+skipped+failed < r.prog.Planned {
		return false, nil
	}
	r.is.Status, r.is.SentAt = store.IssueSent, m.now().UTC().Truncate(time.Millisecond)
	m.archGen++
	return true, nil
}

// ArchiveGeneration implements store.Issues.
func (m *Memory) ArchiveGeneration(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.archGen, nil
}
