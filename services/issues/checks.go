package issues

import (
	"context"
	"fmt"
	"time"

	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// BodyRenderer is a Renderer that also renders an issue's body alone as
// HTML, its links as written: the link checks ask those, not the counted
// redirect a reader's mail goes through. A Renderer without it has its
// preview's links checked.
type BodyRenderer interface {
	BodyHTML(ctx context.Context, is store.Issue) (string, error)
}

// Checker runs the pre-send checks (presend) of an issue as a reader
// of its first topic gets it: for GET /api/issues/{id}/checks, the
// console's preview and the send step alike.
type Checker struct {
	Renderer Renderer
	// Checks are the checks' own parts (the link checker; nil: links
	// not checked).
	Checks *presend.Checker
	// PostalAddress is the settings' in effect (nil: not checked, as
	// if one were set).
	PostalAddress func(ctx context.Context) string
}

// Run renders is and runs the checks on it. An error is a mail that
// could not be rendered.
func (c *Checker) Run(ctx context.Context, is store.Issue) ([]presend.Result, error) {
	topic := ""
	if len(is.Topics) > 0 {
		topic = is.Topics[0]
	}
	_, html, err := c.Renderer.Preview(ctx, is, topic, "html")
	if err != nil {
		return nil, fmt.Errorf("render the issue's HTML: %w", err)
	}
	_, text, err := c.Renderer.Preview(ctx, is, topic, "text")
	if err != nil {
		return nil, fmt.Errorf("render the issue's text: %w", err)
	}
	n, err := c.Renderer.HTMLSize(ctx, is)
	if err != nil {
		return nil, fmt.Errorf("measure the issue's HTML part: %w", err)
	}
	m := presend.Mail{Subject: is.Subject, HTML: string(html), Text: string(text), HTMLBytes: n, SkipPostal: c.PostalAddress == nil}
	if br, ok := c.Renderer.(BodyRenderer); ok {
		if m.Body, err = br.BodyHTML(ctx, is); err != nil {
			return nil, fmt.Errorf("render the issue's body: %w", err)
		}
	}
	if c.PostalAddress != nil {
		m.PostalAddress = c.PostalAddress(ctx)
	}
	return c.Checks.Run(ctx, m), nil
}

// ChecksError is a send refused by its pre-send checks' errors (409),
// unless they are ignored (SendOptions.IgnoreChecks).
type ChecksError struct{ Failed []presend.Result }

func (e *ChecksError) Error() string {
	return "the issue fails its pre-send checks (" + presend.Summary(e.Failed) + "); fix them, or send with ignore_checks to send it anyway"
}

// SendLinksBudget is how long a send waits for its links' answers: the
// request has 5 s in all, and the render and the audience come after.
// A link not answered by then is a warning ("not checked"), never a
// refusal; the preview's checks (GET /api/issues/{id}/checks) take their
// full LinksBudget and leave their answers cached for the send.
const SendLinksBudget = 1500 * time.Millisecond

// preSend runs the checks before a send: an error-level result refuses
// it unless ignored. The size check's error is the size guard's
// (checkSize, overridden by force), not counted twice here.
func (s *Service) preSend(ctx context.Context, is store.Issue, ignore bool, rep *SendReport) error {
	if s.Checks == nil {
		return nil
	}
	rs, err := s.Checks(presend.WithLinksBudget(ctx, SendLinksBudget), is)
	if err != nil {
		return err
	}
	var failed []presend.Result
	for _, r := range presend.Errors(rs) {
		if r.Check != "size" {
			failed = append(failed, r)
		}
	}
	switch {
	case len(failed) == 0:
		return nil
	case !ignore:
		return &ChecksError{Failed: failed}
	}
	rep.Overridden = append(rep.Overridden, OverrideChecks)
	return nil
}
