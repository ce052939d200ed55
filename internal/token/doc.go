// Package token signs and verifies the links in mails: a confirm token
// activates a subscription, an unsubscribe token ends it (or one topic of
// it), a preferences token opens the preference centre. Each names its
// purpose inside the signed bytes, so one can never stand in for another.
//
// A token is two unpadded base64url parts joined by a dot: a body and its
// HMAC-SHA256. The body is the purpose, the subscriber's id, the expiry
// (unix seconds; 0 for none), for a link that leaves one topic, the
// topic, and for a link in an issue's mail, the id (after the
// topic's line, which is empty when there is no topic), one per line:
//
//	unsubscribe
//	42
//	0
//	digest
//	17
//
// The id lets an unsubscribe through the link count in that
// issue's report; being signed, it cannot be moved to another issue.
//
// A token names the subscriber by id, never by address: links end up in
// proxy logs, analytics and link scanners, and whoever sees one learns
// nothing about whose it is. Both parts are decoded strictly and must be
// the canonical encoding of what they decode to, so each signed link has
// exactly one spelling.
//
// Tokens from before ids (the same layout with the address where the id
// is, signed with the secret itself rather than a key derived from it)
// still verify for a confirmation until it expires and for unsubscribe
// and preferences links without limit: those links are in mails that
// already sit in inboxes, and RFC 8058's one-click must keep working for
// them. They are never issued any more.
package token
