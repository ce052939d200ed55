package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// stepMessage is a sequence step's mail (its template, as the worker's
// renderer has it from the catalog) to a tester or a preview's sample
// reader of topic, as the worker makes it for a reader (Links.For); a
// test's unsubscribe and preferences links are inert and its subject
// says [Test].
func (x *issueMail) stepMessage(template, topic string, to store.Subscriber, inert bool) (*mailer.Message, error) {
	d := x.links.For(to, topic)
	if inert {
		d.UnsubscribeURL = x.links.BaseURL + "/unsubscribe?token=" + api.InertToken
		d.PreferencesURL = x.links.BaseURL + "/preferences?token=" + api.InertToken
	}
	msg, err := x.render.Render(template, d)
	if err != nil {
		return nil, err
	}
	if inert {
		msg.Subject = "[Test] " + msg.Subject
	}
	msg.ToName = to.Name
	return msg, nil
}

// stepMailOf is x as the console's StepMail: nil without one (a nil
// *issueMail in the interface would not be nil).
func stepMailOf(x *issueMail) console.StepMail {
	if x == nil {
		return nil
	}
	return x
}

// PreviewStep implements the console's StepMail: the step's HTML part as
// the sample reader gets it.
func (x *issueMail) PreviewStep(_ context.Context, template, topic string) ([]byte, error) {
	msg, err := x.stepMessage(template, topic, previewReader, false)
	if err != nil {
		return nil, err
	}
	return []byte(msg.HTML), nil
}

// SendStepTest implements the console's StepMail: the step's mail now,
// through the real path, to each address (checked by the caller's
// TestGate).
func (x *issueMail) SendStepTest(ctx context.Context, template, topic string, emails []string) error {
	var errs []string
	for _, e := range emails {
		msg, err := x.stepMessage(template, topic, store.Subscriber{Email: e}, true)
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
