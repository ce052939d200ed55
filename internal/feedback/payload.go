package feedback

import (
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/tasks"
)

// FromReport makes the task payload of a report read from mail. The tag
// of the address the report was sent to (envelopeTag) goes first, then the
// report's own; a tag this service did not make is ignored, never trusted.
// ok is false when the report names nobody: no valid tag and no address.
func FromReport(rep Report, envelopeTag string, t *Tagger) (p tasks.FeedbackPayload, ok bool) {
	p = tasks.FeedbackPayload{ID: rep.ID, Type: rep.Type, Source: "smtp", Reason: rep.Reason}
	for _, tag := range []string{envelopeTag, rep.Tag} {
		if id, kind, valid := t.Parse(tag); valid {
			p.SubscriberID, p.Kind = id, kind
			break
		}
	}
	if p.SubscriberID == 0 {
		// Without a tag the recipient alone names the subscriber. With one,
		// it must agree with the tag (checked by the store), except in a
		// DSN for a VERP address, where it is the same mail anyway: an
		// MTA may rewrite the recipient (forwarding), so trust the tag.
		p.Email = normalise(rep.Recipient)
	}
	return p, p.SubscriberID > 0 || p.Email != ""
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
