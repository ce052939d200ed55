package feedback

import (
	"errors"
	"fmt"

	"github.com/newsletter/newsletter/internal/address"
)

// ErrUnverified means a report does not name its subscriber by a tag this
// service made: it changes nothing. Anyone can send a report naming any
// address to the bounce address, so the address in a report is never
// believed on its own.
var ErrUnverified = errors.New("report not verified by a VERP tag")

// Why a report is unverified (each wraps ErrUnverified).
var (
	// ErrNoTag: neither the address the report was sent to nor the
	// headers it quotes carry a tag.
	ErrNoTag = fmt.Errorf("%w: it carries no tag", ErrUnverified)
	// ErrTagForged: it carries tags, none of which this service made.
	ErrTagForged = fmt.Errorf("%w: no tag it carries verifies", ErrUnverified)
	// ErrTestMail: the report is about a test send (TestTag), which went
	// to no subscriber: it is ours, and changes nothing.
	ErrTestMail = errors.New("the report is about a test send")
	// ErrTagsDisagree: its tags verify but name different subscribers
	// (pieces of two mails put together).
	ErrTagsDisagree = fmt.Errorf("%w: its tags name different subscribers", ErrUnverified)
)

// FromReport makes the event of a report read from mail. Only a
// tag decides who it is about: the tags of the envelope recipients the
// report was sent to (bounces+<tag>@…, the address our mail gave as its
// envelope sender) and those the report quotes from the original (its
// Return-Path and Message-ID). Tags that do not verify are ignored (a
// relay may rewrite a Message-ID into something that looks like one);
// those that verify must all name the same subscriber. The recipient
// address the report states is not used: with the tag, the store finds the
// subscriber by id, even when a forwarder changed the address.
func FromReport(rep Report, envelopeTags []string, t *Tagger) (Event, error) {
	p := Event{ID: rep.ID, Type: rep.Type, Source: "smtp", Reason: rep.Reason}
	seen := false
	for _, tag := range append(append([]string(nil), envelopeTags...), rep.Tags...) {
		if tag == "" {
			continue
		}
		seen = true
		tr, ok := t.Trace(tag)
		switch {
		case !ok:
			continue
		case tr.Kind == KindTest:
			return Event{}, ErrTestMail
		case p.SubscriberID == 0:
			p.SubscriberID, p.Kind, p.IssueID = tr.Subscriber, tr.Kind, tr.Issue
		case p.SubscriberID != tr.Subscriber:
			return Event{}, ErrTagsDisagree
		case p.IssueID == 0:
			p.IssueID = tr.Issue
		}
	}
	switch {
	case p.SubscriberID > 0:
		return p, nil
	case seen:
		return Event{}, ErrTagForged
	}
	return Event{}, ErrNoTag
}

// normalise is the store's form of an address in a report (the signup's
// normalisation, IDNA included); anything that is not an address gives "".
func normalise(addr string) string {
	n, err := address.Normalize(addr)
	if err != nil {
		return ""
	}
	return n
}
