// Package feedback turns what mail systems say after the 250 into
// tasks.FeedbackPayload reports: delivery-status notifications (RFC 3464)
// and abuse reports (RFC 5965, ARF) that arrive by mail at the bounce
// address, and the event webhooks of Amazon SES (through SNS), SendGrid,
// Mailgun and Postmark, each verified the way its provider documents.
//
// It also holds the VERP tag (verp.go): every mail's envelope sender and
// Message-ID carry a short MAC over the subscriber id and mail kind, so a
// report is traced to its subscriber without trusting what it claims, and
// a forged one cannot suppress anybody.
//
// The store applies reports (store.Suppressions.RecordFeedback); this
// package only reads and verifies them.
package feedback
