package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks/worker"
)

// issueMail is the API's IssueRenderer: the worker's renderer, links and
// mailer, so a preview is the mail a reader gets and a test goes the
// real way (DKIM, VERP, List-Unsubscribe).
type issueMail struct {
	render *mailer.Renderer
	links  worker.Links
	mail   mailer.Mailer
}

// previewReader is the sample reader of a preview: its personal links are
// real links for an address nobody has.
var previewReader = store.Subscriber{Email: "reader@example.com"}

func (x *issueMail) message(is store.Issue, topic string, to store.Subscriber, inert bool) (*mailer.Message, error) {
	body, err := mailer.RenderMarkdown(is.Body)
	if err != nil {
		return nil, err
	}
	d := x.links.To(worker.IssueData(x.links, is, topic, body), to, topic)
	if inert {
		// A test mail's links lead to pages that do nothing: the tester
		// is no reader, and a forwarded test must not act for anyone.
		d.UnsubscribeURL = x.links.BaseURL + "/unsubscribe?token=test"
		d.PreferencesURL = x.links.BaseURL + "/preferences?token=test"
		d.Subject = "[Test] " + d.Subject
	}
	msg, err := x.render.Render(mailer.KindIssue, d)
	if err != nil {
		return nil, err
	}
	msg.ToName = to.Name
	return msg, nil
}

// Preview implements api.IssueRenderer.
func (x *issueMail) Preview(_ context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	msg, err := x.message(is, topic, previewReader, false)
	if err != nil {
		return "", nil, err
	}
	switch format {
	case "text":
		return "text/plain; charset=utf-8", []byte(msg.Text), nil
	case "eml":
		c, ok := x.mail.(interface {
			Compose(*mailer.Message) ([]byte, error)
		})
		if !ok {
			return "", nil, errors.New("eml previews need NEWSLETTER_SMTP_URL (the dev mailbox composes no MIME)")
		}
		b, err := c.Compose(msg)
		return "message/rfc822", b, err
	}
	return "text/html; charset=utf-8", []byte(msg.HTML), nil
}

// SendTest implements api.IssueRenderer.
func (x *issueMail) SendTest(ctx context.Context, is store.Issue, emails []string) error {
	var errs []string
	for _, e := range emails {
		msg, err := x.message(is, is.Topics[0], store.Subscriber{Email: e}, true)
		if err == nil {
			err = x.mail.Send(ctx, msg)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", e, err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
