// Package feedback turns what mail systems say after the 250 into
// Events (event.go): delivery-status notifications (RFC 3464)
// and abuse reports (RFC 5965, ARF) that arrive by mail at the bounce
// address, and the event webhooks of Amazon SES (through SNS), SendGrid,
// Mailgun and Postmark, each verified the way its provider documents.
//
// It also holds the VERP tag (verp.go): every mail's envelope sender and
// Message-ID, whatever its kind (sequence steps included), carry a short
// MAC over the subscriber id and mail kind. A report that arrives by mail
// counts only when such a tag names its subscriber (FromReport): the
// address a report states is never believed, so a forged one cannot
// suppress anybody. Webhooks are believed as far as their provider's
// signature goes, and no further: a Mailgun token is used once (Nonces),
// an SNS certificate comes only from an SNS host, without redirects.
//
// The store applies reports (store.Suppressions.RecordFeedback); this
// package only reads and verifies them.
package feedback
