package issues

import (
	"context"
	"errors"
	"time"

	"github.com/newsletter/newsletter/store"
)

// ErrDigestDraft is a delete of an issue a digest run made (409): the
// run points at it, and would find nothing to send once it is purged.
var ErrDigestDraft = errors.New("this issue is a digest run's: cancel it instead")

// TrashKept is how long a trashed issue can be restored: the purge
// removes it after that.
const TrashKept = store.TrashDays * 24 * time.Hour

// purgeBatch is the most issues one lazy purge removes: a purge runs
// inside a publisher's request, so it stays one short script; the rest
// go with the next one.
const purgeBatch = 100

// Trash moves a draft, scheduled or sent issue to the trash, from which
// RestoreFromTrash brings it back for TrashKept: a *store.StateError for
// any other status (a sending one is cancelled, not trashed),
// ErrDigestDraft for a digest run's; nothing changed then. A scheduled
// one's plan does nothing when its time comes; a sent one leaves the
// archive. It purges what has been in the trash longer first.
func (s *Service) Trash(ctx context.Context, is store.Issue) (store.Issue, error) {
	switch is.Status {
	case store.IssueDraft, store.IssueScheduled, store.IssueSent:
	default:
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	if is.Period != "" {
		return is, ErrDigestDraft
	}
	s.PurgeTrash(ctx)
	return s.Store.TrashIssue(ctx, is.ID)
}

// RestoreFromTrash brings a trashed issue back as it was: a draft or a
// sent issue as such, a scheduled one as a draft (its time may have
// passed; sending is asked again). A *store.StateError when it is not
// in the trash.
func (s *Service) RestoreFromTrash(ctx context.Context, is store.Issue) (store.Issue, error) {
	if is.Status != store.IssueTrashed {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	return s.Store.RestoreIssue(ctx, is.ID)
}

// PurgeTrash removes the issues trashed more than TrashKept ago, up to
// purgeBatch at a time. The purge is lazy: it runs on each move to the
// trash and each listing of it, not on a clock, so an issue may stay
// past its time while nobody deletes or lists; since Trashed purges
// before it lists, one past its time is never offered for restore. A
// failure is logged, never the caller's: the trash is no worse than
// before.
func (s *Service) PurgeTrash(ctx context.Context) {
	if _, err := s.Store.PurgeTrash(ctx, s.now().Add(-TrashKept), purgeBatch); err != nil {
		s.log().Warn("issues: the trash was not purged now; the next delete or listing tries again", "err", err)
	}
}

// Trashed lists the trash (newest first, ids below after), purging what
// is past TrashKept first.
func (s *Service) Trashed(ctx context.Context, after int64, limit int) ([]store.Issue, error) {
	s.PurgeTrash(ctx)
	return s.Store.ListIssues(ctx, store.IssueTrashed, after, limit)
}

// PurgeAt is when a trashed issue is purged.
func PurgeAt(is store.Issue) time.Time { return is.TrashedAt.Add(TrashKept) }
