package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// prepare is the issue's mail to topic's readers, rendered once per
// issue version and topic for all the worker's batches, not once per
// batch: the Markdown, then the shared parts of the mail (Prepare renders,
// checks and encodes them). The result is the same as a render of its own
// for each batch (and as the preview): only the work is shared.
func (h *IssueSender) prepare(is store.Issue, topic string) (mailer.Data, *mailer.Prepared, error) {
	h.prepMu.Lock()
	defer h.prepMu.Unlock()
	key := preparedKey{is.ID, is.Version, topic}
	if p, ok := h.prepared[key]; ok {
		return p.data, p.prep, nil
	}
	var body mailer.Body
	var links []string
	for k, p := range h.prepared {
		if k.id == is.ID && k.version == is.Version {
			body, links = mailer.Body{HTML: p.data.IssueHTML, Text: p.data.IssueText}, p.links
			break
		}
	}
	if body == (mailer.Body{}) {
		var err error
		if body, err = mailer.RenderMarkdown(is.Body); err != nil {
			return mailer.Data{}, nil, fmt.Errorf("render issue %d: %w", is.ID, err)
		}
		h.Metrics.IssueRenders.Inc()
		body, links = h.Links.Counted(is.ID, body)
	}
	data := IssueData(h.Links, is, topic, body)
	prep, err := h.Deliver.Render.Prepare(mailer.KindIssue, data)
	if err != nil {
		return mailer.Data{}, nil, fmt.Errorf("prepare issue %d: %w", is.ID, err)
	}
	if h.prepared == nil || len(h.prepared) >= maxPrepared {
		h.prepared = map[preparedKey]preparedIssue{}
	}
	h.prepared[key] = preparedIssue{data: data, prep: prep, links: links}
	return data, prep, nil
}

// storeLinks stores the counted links of the issue's version once per
// worker, before its first mail goes: a click on a link of a mail
// already sent must find its target.
func (h *IssueSender) storeLinks(ctx context.Context, is store.Issue, links []string) error {
	v := issueVersion{is.ID, is.Version}
	h.prepMu.Lock()
	done := h.linksStored[v]
	h.prepMu.Unlock()
	if done || links == nil {
		return nil
	}
	if err := h.Store.SetIssueLinks(ctx, is.ID, links); err != nil {
		return err
	}
	h.prepMu.Lock()
	if h.linksStored == nil || len(h.linksStored) >= maxPrepared {
		h.linksStored = map[issueVersion]bool{}
	}
	h.linksStored[v] = true
	h.prepMu.Unlock()
	return nil
}

// HandleIssueBatch sends an issue to a batch of readers (the whole batch
// claimed, paced and sent over one SMTP session, marks, quiet hours),
// reading the issue's status before the
// first mail and again every CheckInterval while it sends: a paused or
// cancelled issue (or one resumed since, in a new round) has the rest
// handed back unsent (a resume plans them again; the marks skip whoever
// got it).
func (h *IssueSender) HandleIssueBatch(ctx context.Context, p tasks.IssueBatchPayload) error {
	st, err := h.status(ctx, p.IssueID)
	if errors.Is(err, store.ErrNoIssue) {
		return fmt.Errorf("issue %d: %w", p.IssueID, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	checked := h.Now()
	if st, err = h.firstLocalBatch(ctx, p, st); err != nil {
		return err
	}
	if st.Status != store.IssueSending || p.Round != st.Round {
		// Paused, cancelled or done; or a batch of an earlier round: a
		// resume plans everyone its rounds had not sent again, so a held
		// batch of the round before (a local hour, quiet hours) would
		// only race the new round's batch for the same readers' marks,
		// and the loser would wait out the claim before it found them
		// sent.
		return nil
	}
	is, err := h.content(ctx, p.IssueID, st)
	if err != nil {
		return err
	}
	subs, err := h.Store.SubscribersByID(ctx, p.IDs)
	if err != nil {
		return err
	}
	chans, err := h.Store.ChannelsOf(ctx, p.IDs)
	if err != nil {
		return err
	}
	outcomes := store.IssueOutcomeKey(is.ID)
	mails, skipped, held, links, err := h.sortRecipients(is, p.IDs, subs, chans)
	if err != nil {
		return err
	}
	if err := h.storeLinks(ctx, is, links); err != nil {
		return err
	}
	if len(skipped) > 0 {
		if err := h.setOutcome(ctx, outcomes, store.OutcomeSkipped, skipped); err != nil {
			return err
		}
	}
	for until, ids := range held {
		if err := enqueueOnce(ctx, h.Queue, tasks.NewIssueBatch(is.ID, p.Round, ids, until, true)); err != nil {
			return fmt.Errorf("defer quiet recipients: %w", err)
		}
	}
	if len(mails) == 0 {
		return h.finish(ctx, is)
	}
	gate := h.newStatusGate(is.ID, p.Round, st, checked)
	failed, stopped, retry := h.Deliver.DeliverGated(ctx, mails, gate.check)
	if err := h.recordFailures(ctx, outcomes, failed); err != nil {
		return firstErr(retry, err)
	}
	if stopped > 0 {
		h.Log.Info("issue: batch stopped", "issue", is.ID, "status", gate.seen.Status, "round", gate.seen.Round, "unsent", stopped)
		return retry
	}
	if retry != nil {
		return retry
	}
	return h.finish(ctx, is)
}

// recordFailures records the outcome of the batch's mails that did not
// go for good: skipped when the reader left meanwhile (ErrNotWanted),
// failed otherwise. Either way the reader is done with this issue.
func (h *IssueSender) recordFailures(ctx context.Context, outcomes string, failed []Failure) error {
	var gone, bad []int64
	for _, f := range failed {
		if errors.Is(f.Err, ErrNotWanted) {
			gone = append(gone, f.SubscriberID)
		} else {
			bad = append(bad, f.SubscriberID)
		}
	}
	for outcome, ids := range map[string][]int64{store.OutcomeSkipped: gone, store.OutcomeFailed: bad} {
		if len(ids) == 0 {
			continue
		}
		if err := h.setOutcome(ctx, outcomes, outcome, ids); err != nil {
			return fmt.Errorf("record %d %s recipients: %w", len(ids), outcome, err)
		}
	}
	return nil
}

// sortRecipients sorts a batch's readers subs (loaded for ids, in their
// order) into the mails to send now, the readers skipped (gone, not
// active, or no longer following any of the issue's topics) and the
// readers held for the end of their quiet hours (by the time it ends).
// A reader who turned e-mail off for each of the issue's topics they
// follow (chans) is skipped.
func (h *IssueSender) sortRecipients(is store.Issue, ids []int64, subs []store.Subscriber, chans []store.Channels) (mails []Mail, skipped []int64, held map[time.Time][]int64, links []string, err error) {
	key := strconv.FormatInt(is.ID, 10)
	countAs := ""
	if is.Period != "" {
		countAs = mailer.KindDigest // the weekly digest's issue
	}
	now := h.Now()
	held = map[time.Time][]int64{}
	// The batch's readers get the issue as one of a few topics: each
	// topic's mail is fetched from h.prepare once per batch, not once per
	// reader under the lock every batch of the worker shares.
	byTopic := map[string]preparedIssue{}
	for i, s := range subs {
		topic, has := IssueTopic(is, s, chans[i])
		switch until := h.Quiet.Until(s.Timezone, now); {
		case s.ID == 0 || s.Status != store.Active || !has:
			skipped = append(skipped, ids[i])
		case !until.IsZero():
			held[until] = append(held[until], s.ID)
		default:
			shared, ok := byTopic[topic]
			if !ok {
				stream, prep, err := h.prepare(is, topic)
				if err != nil {
					return nil, nil, nil, nil, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
				}
				shared = preparedIssue{data: stream, prep: prep}
				byTopic[topic] = shared
			}
			d := h.Links.ToIssue(shared.data, s, topic, is.ID)
			d.Reader = h.Links.Reader(is.ID, s.ID, now)
			mails = append(mails, Mail{
				To:       s,
				Mark:     store.Mark{Kind: store.IssueMarkKind, Key: key, SubscriberID: s.ID, Shared: true},
				Data:     d,
				Prepared: shared.prep,
				CountAs:  countAs,
				Recheck:  store.Active,
			})
		}
	}
	if len(mails) > 0 {
		h.prepMu.Lock()
		for k, p := range h.prepared {
			if k.id == is.ID && k.version == is.Version {
				links = p.links
				break
			}
		}
		h.prepMu.Unlock()
	}
	return mails, skipped, held, links, nil
}

// statusGate is an issue batch's Gate. Asked before every mail, it reads
// the issue's status from Redis once an interval (CheckInterval), and
// stops the batch once the issue is no longer sending in the batch's
// round (paused, cancelled, or resumed in a new one).
type statusGate struct {
	h        *IssueSender
	issue    int64
	round    int
	interval time.Duration
	// checked is when the status was last read; seen is what it was.
	checked time.Time
	seen    store.IssueStatus
}

// newStatusGate starts a gate from the status st, read at checked.
func (h *IssueSender) newStatusGate(issue int64, round int, st store.IssueStatus, checked time.Time) *statusGate {
	return &statusGate{h: h, issue: issue, round: round, interval: h.CheckInterval, checked: checked, seen: st}
}

// check is the Gate.
func (g *statusGate) check(ctx context.Context) (bool, error) {
	if g.h.Now().Sub(g.checked) < g.interval {
		return false, nil
	}
	cur, err := g.h.status(ctx, g.issue)
	if err != nil {
		return false, err
	}
	g.checked, g.seen = g.h.Now(), cur
	return cur.Status != store.IssueSending || cur.Round != g.round, nil
}

// setOutcome records readers' outcome, waiting out an outage (a bitmap:
// recording twice is recording once).
func (h *IssueSender) setOutcome(ctx context.Context, key, outcome string, ids []int64) error {
	return h.Store.SetOutcome(ctx, key, outcome, ids...)
}

// finish marks the issue sent once every planned reader is done, and
// tells the webhook endpoints that asked (issue.sent) the one time it
// does.
func (h *IssueSender) finish(ctx context.Context, is store.Issue) error {
	done, err := h.Store.FinishIssue(ctx, is.ID)
	if err != nil || !done {
		return err
	}
	h.Notify.NotifyLogged(ctx, tasks.IssueSentWebhookEvent(tasks.WebhookIssue{ID: is.ID, Slug: is.Slug, Subject: is.Subject, Topics: is.Topics}, h.Now()))
	return nil
}

// firstLocalBatch moves a local-hour send, scheduled until its first
// reader's hour, to sending when a batch of its round comes due (only a
// local-hour send has batches while scheduled: any other is moved to
// sending before its planner queues one). The move checks the status and
// round: this is the barrier against an edit or a reschedule landing at
// the same moment, which wins or is refused as a whole. st is the status
// after it; an issue moved otherwise meanwhile is read again.
func (h *IssueSender) firstLocalBatch(ctx context.Context, p tasks.IssueBatchPayload, st store.IssueStatus) (store.IssueStatus, error) {
	if st.Status != store.IssueScheduled || st.Round != p.Round {
		return st, nil
	}
	is, err := h.Store.TransitionIssue(ctx, p.IssueID, []string{store.IssueScheduled}, store.IssueSending, store.IssueChange{Round: p.Round})
	if errors.Is(err, store.ErrIssueState) || errors.Is(err, store.ErrIssueStale) {
		return h.status(ctx, p.IssueID)
	}
	if err != nil {
		return st, err
	}
	h.Log.Info("issue: first local hour came; sending", "issue", is.ID)
	// The readers' browsers, once the mail starts (a TaskID per round:
	// the planner, still walking, queues it once with this).
	if err := h.fanOutPush(ctx, is, p.Round); err != nil {
		h.Log.Warn("issue: push fan-out not queued (a planner still walking queues it on its next page)", "issue", is.ID, "err", err)
	}
	return store.IssueStatus{Status: is.Status, Round: is.Round, Version: is.Version}, nil
}
