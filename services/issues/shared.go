package issues

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// What the API, the console and the commands share when they act on an
// issue: the renderer they preview through, the checks of a preview, the
// actions by name and their audit wording.

// listPage is how many issues SegmentInUse reads a page.
const listPage = 100

// Renderer renders and test-sends issues. The API never imports the
// mailer: the binary injects one built on the worker's renderer, links and
// mailer, so a preview is the very mail a reader gets.
type Renderer interface {
	// Preview is the mail of is as a reader of topic gets it (personal
	// links for a sample reader): format html, text or eml.
	Preview(ctx context.Context, is store.Issue, topic, format string) (contentType string, body []byte, err error)
	// SendTest mails is now to each address through the real path,
	// subject prefixed "[Test] ", not counted, its personal links inert.
	SendTest(ctx context.Context, is store.Issue, emails []string) error
	// HTMLSize is the bytes of the HTML part a reader gets (its links
	// counted): the size guard's measure (ClipBytes).
	HTMLSize(ctx context.Context, is store.Issue) (int, error)
}

// Preview is the preview of is for the API and the commands alike:
// topic "" is the issue's first, format "" is html; another topic than
// the issue's or another format is an *InputError.
func Preview(ctx context.Context, r Renderer, is store.Issue, topic, format string) (contentType string, body []byte, err error) {
	if topic == "" && len(is.Topics) > 0 {
		topic = is.Topics[0]
	}
	if format == "" {
		format = "html"
	}
	if !slices.Contains(is.Topics, topic) {
		return "", nil, &InputError{Msg: fmt.Sprintf("topic: one of the issue's topics (%s)", strings.Join(is.Topics, ", "))}
	}
	if format != "html" && format != "text" && format != "eml" {
		return "", nil, &InputError{Msg: "format: html, text or eml"}
	}
	return r.Preview(ctx, is, topic, format)
}

// ActionAudit is the audit log's name of action (one of
// Actions).
func ActionAudit(action string) string {
	return map[string]string{"pause": audit.IssuePaused, "resume": audit.IssueResumed, "cancel": audit.IssueCancelled,
		"reschedule": audit.IssueRescheduled, "unschedule": audit.IssueUnscheduled}[action]
}

// Change makes action (one of Actions) on is as its caller
// just read it, for the API and the console alike; when is the new time
// of a reschedule.
func Change(ctx context.Context, svc *Service, is store.Issue, action string, when When) (store.Issue, error) {
	switch action {
	case "pause":
		return svc.Pause(ctx, is)
	case "resume":
		return svc.Resume(ctx, is)
	case "reschedule":
		return svc.Reschedule(ctx, is, when)
	case "unschedule":
		return svc.Unschedule(ctx, is)
	case "cancel":
		return svc.Cancel(ctx, is)
	}
	return is, &InputError{Msg: "action: one of " + strings.Join(Actions, ", ")}
}

// SendDetail is the audit's detail of a send: when, to how many, and
// what force overrode.
func SendDetail(when When, rep SendReport) string {
	d := fmt.Sprintf("%s, to %d readers", when.Detail(), rep.Audience)
	if len(rep.Overridden) > 0 {
		d += ", forced past: " + strings.Join(rep.Overridden, ", ")
	}
	return d
}

// Lister lists issues by status (store.Issues).
type Lister interface {
	ListIssues(ctx context.Context, status string, after int64, limit int) ([]store.Issue, error)
}

// SegmentInUse is an issue not yet sent nor cancelled that goes to
// segment id (0: none): its planner reads the segment when it sends, so
// the API and the console refuse to delete it.
func SegmentInUse(ctx context.Context, list Lister, id int64) (int64, error) {
	// One walk over the issues, their status judged here: a walk per
	// status read every issue once for each (the probe saw a viewer's
	// segment page read them all four times).
	waiting := []string{store.IssueDraft, store.IssueScheduled, store.IssueSending, store.IssuePaused}
	for after := int64(0); ; {
		page, err := list.ListIssues(ctx, "", after, listPage)
		if err != nil {
			return 0, err
		}
		for _, is := range page {
			if is.Segment == id && slices.Contains(waiting, is.Status) {
				return is.ID, nil
			}
		}
		if len(page) < listPage {
			return 0, nil
		}
		after = page[len(page)-1].ID
	}
}
