package worker

import (
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	"time"

	"github.com/newsletter/newsletter/services/engage"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Links builds what ties a mail to its topic: the URLs inside it, the
// topic's name and its List-Id.
type Links struct {
	BaseURL string
	Signer  *token.Signer
	// Topics are the topics file's. NewHandlers gives the built-in ones
	// when nil; a Links built elsewhere (a test send, a preview) sets them.
	Topics topics.Source
	// ListID is the service's List-Id ("Name <newsletter.example.com>");
	// each topic's is a sub-list of it ("" : no List-Id).
	ListID string
	// Engagement signs the counted links (internal/engage); nil: links
	// are left as written (NEWSLETTER_ENGAGEMENT=off).
	Engagement *engage.Keys
	// Opens adds the open pixel to issues (NEWSLETTER_OPENS=on).
	Opens bool
	// Newsletter are the settings in effect, read for each batch or mail
	// (a settings.Cache through NewsletterOf; nil: none, the layout shows
	// no name and the sender's From).
	Newsletter func() mailer.Newsletter
}

// Counted is an issue's body with its links going through the counted
// redirect, a hidden honeypot link and, with opens on, the pixel; and
// the links' targets by index (nil with links not counted). The reader's
// part of each token is mailer.ReaderMark, filled in per reader
// (Reader).
func (l Links) Counted(issue int64, body mailer.Body) (mailer.Body, []string) {
	if l.Engagement == nil {
		return body, nil
	}
	k := l.Engagement
	link := func(route string, what engage.What, index int) string {
		return l.BaseURL + route + engage.Token(k.LinkPart(what, issue, index), mailer.ReaderMark)
	}
	rw := engage.Rewrite(string(body.HTML), body.Text, l.BaseURL, func(i int) string { return link("/r/", engage.Link, i) })
	out := rw.HTML + engage.HoneypotHTML(link("/r/", engage.Honeypot, 0))
	if l.Opens {
		out += engage.PixelHTML(link("/o/", engage.Pixel, 0))
	}
	if rw.URLs == nil {
		rw.URLs = []string{}
	}
	return mailer.Body{HTML: htmltemplate.HTML(out), Text: rw.Text}, rw.URLs //nolint:gosec // the rendered body with our own links put in, escaped (engage.Rewrite)
}

// TestCounted is an issue's body as a test send (or a preview) carries
// it: its links go through the redirect as a reader's do, but with test
// tokens (engage.Keys.TestLink) that lead to their target, name no
// reader and are never counted, and lead on for engage.TestLinkTTL from
// made; no honeypot, no pixel. body itself with links not counted.
func (l Links) TestCounted(issue int64, body mailer.Body, made time.Time) mailer.Body {
	if l.Engagement == nil {
		return body
	}
	rw := engage.RewriteTo(string(body.HTML), body.Text, l.BaseURL, func(_ int, target string) string {
		return l.Engagement.TestLink(l.BaseURL, issue, target, made)
	})
	return mailer.Body{HTML: htmltemplate.HTML(rw.HTML), Text: rw.Text} //nolint:gosec // the rendered body with our own links put in, escaped (engage.Rewrite)
}

// CountedLink is target as the counted redirect's link index 0 of
// engagement (an event's one link), the reader's part left as
// mailer.ReaderMark; target itself when links are not counted, when
// there is no engagement id, or for a link to the service's own pages
// (which Counted leaves alone too).
func (l Links) CountedLink(engagement int64, target string) string {
	if engagement <= 0 || !l.Counts(target) {
		return target
	}
	return l.BaseURL + "/r/" + engage.Token(l.Engagement.LinkPart(engage.Link, engagement, 0), mailer.ReaderMark)
}

// Counts tells whether a link to target goes through the counted
// redirect.
func (l Links) Counts(target string) bool {
	return l.Engagement != nil && target != "" && (l.BaseURL == "" || !strings.HasPrefix(target, l.BaseURL+"/"))
}

// Reader is the reader's part of the counted links in their mail of
// issue, made at sent ("" with links not counted).
func (l Links) Reader(issue, reader int64, sent time.Time) string {
	if l.Engagement == nil {
		return ""
	}
	return l.Engagement.ReaderPart(issue, reader, sent)
}

// NewsletterOf is the settings s as mails show them.
func NewsletterOf(s store.Settings) mailer.Newsletter {
	return mailer.Newsletter{Name: s.Name, Description: s.Description, PostalAddress: s.PostalAddress, LogoURL: s.LogoURL,
		Accent: htmltemplate.CSS(s.Accent), From: s.From, ReplyTo: s.ReplyTo}
}

// Base is what every mail shares: the newsletter's settings.
func (l Links) Base() mailer.Data {
	d := mailer.Data{}
	if l.Newsletter != nil {
		d.Newsletter = l.Newsletter()
	}
	return d
}

// Confirm is the confirmation link for sub. Every link names the
// subscriber by id, never by address: links are seen by proxies,
// analytics and link scanners (internal/token).
func (l Links) Confirm(sub store.Subscriber) string {
	return l.BaseURL + "/confirm?token=" + url.QueryEscape(l.Signer.Sign(token.Confirm, sub.ID))
}

// Unsubscribe is the link that leaves topic ("" : everything) for sub:
// the page and the RFC 8058 one-click target.
func (l Links) Unsubscribe(sub store.Subscriber, topic string) string {
	return l.BaseURL + "/unsubscribe?token=" + url.QueryEscape(l.Signer.SignTopic(token.Unsubscribe, sub.ID, topic))
}

// Preferences is the link to sub's preference centre.
func (l Links) Preferences(sub store.Subscriber) string {
	return l.BaseURL + "/preferences?token=" + url.QueryEscape(l.Signer.Sign(token.Preferences, sub.ID))
}

// ToIssue is To for a mail of issue: its unsubscribe link (the page and
// the List-Unsubscribe one-click) and its preferences link name the issue
// in their signed tokens, so a reader who leaves through them counts in
// that issue's report.
func (l Links) ToIssue(stream mailer.Data, sub store.Subscriber, topic string, issue int64) mailer.Data {
	stream = l.To(stream, sub, topic)
	stream.UnsubscribeURL = l.BaseURL + "/unsubscribe?token=" + url.QueryEscape(l.Signer.SignIssue(token.Unsubscribe, sub.ID, topic, issue))
	stream.PreferencesURL = l.BaseURL + "/preferences?token=" + url.QueryEscape(l.Signer.SignIssue(token.Preferences, sub.ID, "", issue))
	return stream
}

// Stream is what every mail of topic shares: its name and List-Id.
func (l Links) Stream(topic string) mailer.Data {
	d := l.Base()
	if t, ok := l.Topics.Current().Topic(topic); ok {
		d.Topic = t.Name
	}
	if l.ListID != "" {
		d.ListID = l.Topics.Current().ListID(topic, l.ListID)
	}
	return d
}

// For is the data of a mail of topic to sub: the stream's, with sub's
// fields and links.
func (l Links) For(sub store.Subscriber, topic string) mailer.Data {
	return l.To(l.Stream(topic), sub, topic)
}

// To is stream (Stream(topic), made once per batch) with sub's fields and
// links.
func (l Links) To(stream mailer.Data, sub store.Subscriber, topic string) mailer.Data {
	stream.Email, stream.Name = sub.Email, sub.Name
	stream.Subscriber = mailer.Recipient{Email: sub.Email, Name: sub.Name, Fields: sub.Fields, Tags: sub.Tags}
	stream.UnsubscribeURL, stream.PreferencesURL = l.Unsubscribe(sub, topic), l.Preferences(sub)
	return stream
}

// Mails sends the transactional mails: the confirmation and the
// unsubscribe link.
type Mails struct {
	Deliver *Deliverer
	Links   Links
	// Holds get back the mailbox's allowance of a mail that could not be
	// rendered (nil: kept).
	Holds store.MailHolds
}

// giveBack returns the allowance of kind that an unrenderable mail to
// email used: it was never sent, so it must not hold the next request.
func (h *Mails) giveBack(ctx context.Context, kind, email string, err error) error {
	if h.Holds == nil || !Unrenderable(err) {
		return err
	}
	if gerr := h.Holds.GiveBackHold(ctx, kind, email); gerr != nil {
		h.Deliver.Log.Warn("give back the allowance of an unrenderable mail", "kind", kind, "err", gerr)
	}
	return err
}

// HandleConfirm sends the confirmation mail to a pending subscriber.
func (h *Mails) HandleConfirm(ctx context.Context, p tasks.ConfirmPayload) error {
	sub, ok, err := h.Deliver.Recipient(ctx, p.Email, store.Pending)
	if !ok {
		return err
	}
	return h.giveBack(ctx, store.HoldConfirm, sub.Email, h.Deliver.DeliverOne(ctx, Mail{
		To:   sub,
		Mark: store.Mark{Kind: mailer.KindConfirm, Key: p.Nonce, SubscriberID: sub.ID},
		// Nothing the requester chose goes into it (not the name, neither
		// in the text nor in To:): the form is public, and a confirmation
		// must not carry a stranger's text to whoever owns the address.
		Data: h.Links.confirmData(sub),
	}))
}

// HandleUnsubscribeLink mails a one-click unsubscribe link to a subscriber
// who asked to leave by typing the address. Only someone who can read the
// mailbox can use it, so nobody else can unsubscribe them. An unknown or
// ended address gets nothing (the API answered the same either way).
func (h *Mails) HandleUnsubscribeLink(ctx context.Context, p tasks.UnsubscribeLinkPayload) error {
	sub, err := h.Deliver.Store.Get(ctx, p.Email)
	if errors.Is(err, store.ErrNotFound) || err == nil && sub.Status != store.Active && sub.Status != store.Pending {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load subscriber: %w", err)
	}
	return h.giveBack(ctx, store.HoldUnsubscribe, sub.Email, h.Deliver.DeliverOne(ctx, Mail{
		To:   sub,
		Mark: store.Mark{Kind: mailer.KindUnsubscribe, Key: p.Nonce, SubscriberID: sub.ID},
		Data: h.Links.unsubscribeData(sub),
	}))
}

// HandlePreferencesLink mails a fresh preferences link to an active
// subscriber whose link expired and who asked for one on its page. An
// unknown or ended address gets nothing (the API answered the same
// either way). It shares the allowance of the unsubscribe link mailed on
// request (store.HoldUnsubscribe): both are links mailed on a page's ask.
func (h *Mails) HandlePreferencesLink(ctx context.Context, p tasks.PreferencesLinkPayload) error {
	sub, err := h.Deliver.Store.Get(ctx, p.Email)
	if errors.Is(err, store.ErrNotFound) || err == nil && sub.Status != store.Active {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load subscriber: %w", err)
	}
	d := h.Links.Base()
	d.Email, d.PreferencesURL = sub.Email, h.Links.Preferences(sub)
	return h.giveBack(ctx, store.HoldUnsubscribe, sub.Email, h.Deliver.DeliverOne(ctx, Mail{
		To:   sub,
		Mark: store.Mark{Kind: mailer.KindPreferences, Key: p.Nonce, SubscriberID: sub.ID},
		Data: d,
	}))
}

// confirmData is a confirmation's data: the newsletter's, the address and
// the link.
func (l Links) confirmData(sub store.Subscriber) mailer.Data {
	d := l.Base()
	d.Email, d.ConfirmURL = sub.Email, l.Confirm(sub)
	return d
}

// unsubscribeData is the mailed unsubscribe link's data.
func (l Links) unsubscribeData(sub store.Subscriber) mailer.Data {
	d := l.Base()
	d.Email, d.UnsubscribeURL = sub.Email, l.Unsubscribe(sub, "")
	return d
}
