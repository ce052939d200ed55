package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker"
)

// issueMail is the API's IssueRenderer: the worker's renderer, links and
// mailer, so a preview is the mail a reader gets and a test goes the
// real way (DKIM, VERP, List-Unsubscribe).
type issueMail struct {
	render *mailer.Renderer
	links  worker.Links
	mail   mailer.Mailer
	// mime writes the .eml of a preview (app.mimeComposer).
	mime composer
	// tags tag a test send's envelope and Message-ID (TestTag), so a
	// bounce of it is known as ours and ignored.
	tags *feedback.Tagger
}

// composer writes a message's bytes as they go out, without sending it.
type composer interface {
	Compose(*mailer.Message) ([]byte, error)
}

// previewReader is the sample reader of a preview: its personal links are
// real links for an address nobody has.
var previewReader = store.Subscriber{Email: "reader@example.com"}

// message is the issue's mail to a tester or a preview's sample reader:
// its links go through the counted redirect as a reader's do, with test
// tokens that lead on and are never counted (Links.TestCounted).
func (x *issueMail) message(is store.Issue, topic string, to store.Subscriber, inert bool) (*mailer.Message, error) {
	body, err := mailer.RenderMarkdown(is.Body)
	if err != nil {
		return nil, err
	}
	body = x.links.TestCounted(is.ID, body, time.Now())
	d := x.links.To(worker.IssueData(x.links, is, topic, body), to, topic)
	if inert {
		// A test mail's links lead to pages that do nothing: the tester
		// is no reader, and a forwarded test must not act for anyone.
		d.UnsubscribeURL = x.links.BaseURL + "/unsubscribe?token=" + api.InertToken
		d.PreferencesURL = x.links.BaseURL + "/preferences?token=" + api.InertToken
		d.Subject = "[Test] " + d.Subject
	}
	msg, err := x.render.Render(mailer.KindIssue, d)
	if err != nil {
		return nil, err
	}
	msg.ToName = to.Name
	return msg, nil
}

// Preview implements issues.Renderer.
func (x *issueMail) Preview(_ context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	msg, err := x.message(is, topic, previewReader, false)
	if err != nil {
		return "", nil, err
	}
	switch format {
	case "text":
		return "text/plain; charset=utf-8", []byte(msg.Text), nil
	case "eml":
		b, err := x.mime.Compose(msg)
		return "message/rfc822", b, err
	}
	return "text/html; charset=utf-8", []byte(msg.HTML), nil
}

// HTMLSize implements issues.Renderer: the bytes of the HTML part a
// reader of the issue's first topic gets, as the worker makes it (its
// links counted, a reader's token in them), for the size guard.
func (x *issueMail) HTMLSize(_ context.Context, is store.Issue) (int, error) {
	body, err := mailer.RenderMarkdown(is.Body)
	if err != nil {
		return 0, err
	}
	body, _ = x.links.Counted(is.ID, body)
	topic := ""
	if len(is.Topics) > 0 {
		topic = is.Topics[0]
	}
	d := x.links.ToIssue(worker.IssueData(x.links, is, topic, body), sizeReader, topic, is.ID)
	d.Reader = x.links.Reader(is.ID, sizeReader.ID, time.Now())
	msg, err := x.render.Render(mailer.KindIssue, d)
	if err != nil {
		return 0, err
	}
	return len(msg.HTML), nil
}

// BodyHTML implements issues.BodyRenderer: the body's HTML with its
// links as written, for the pre-send link checks.
func (x *issueMail) BodyHTML(_ context.Context, is store.Issue) (string, error) {
	body, err := mailer.RenderMarkdown(is.Body)
	if err != nil {
		return "", err
	}
	return string(body.HTML), nil
}

// sizeReader is the reader the size guard measures for: an id and an
// address as long as most.
var sizeReader = store.Subscriber{ID: 1 << 40, Email: "reader.name@example.com"}

// SendTest implements issues.Renderer.
func (x *issueMail) SendTest(ctx context.Context, is store.Issue, emails []string) error {
	var errs []string
	for _, e := range emails {
		msg, err := x.message(is, is.Topics[0], store.Subscriber{Email: e}, true)
		if err == nil {
			msg.Tag = x.tags.TestTag(is.ID)
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

// mimeComposer is what an eml preview composes with: the SMTP mailer m's
// composer when it is one, so the preview is the bytes it sends; otherwise
// (SES, the dev mailbox, the issue command, which has no transport) a
// composer with the same From, List-Id, return path and DKIM keys that
// never connects anywhere: a preview renders, it sends nothing, so it
// needs no SMTP server.
func (a *app) mimeComposer(m mailer.Mailer) (composer, error) {
	if c, ok := m.(composer); ok {
		return c, nil
	}
	dkim, err := dkimSigner(a.cfg.Config)
	if err != nil {
		return nil, err
	}
	o := mailer.ComposeOptions{From: a.cfg.From, ListID: listID(a.cfg.From), BounceAddress: a.cfg.BounceAddress}
	if dkim != nil {
		// A nil *email.DKIM in the Signer interface would not be nil.
		o.DKIM = dkim
	}
	return mailer.NewComposer(o)
}
