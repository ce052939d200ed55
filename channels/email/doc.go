// Package email is the e-mail channel's outgoing side: it carries a
// composed mail (envelope sender, recipient, the message's bytes) to the
// provider and says what the answer means. It owns the SMTP pool and its
// transaction (pipelined MAIL, RCPT and BDAT or DATA: one write and one
// round trip per mail where the server allows), the Amazon SES API
// client, DKIM signing, the server URL and its probe (`newsletter check`),
// and the classes of failure (SendError: retry, slow the domain, retire
// the address, alert the operator; PausedError: hold the lane).
//
// It batches as SMTP allows: a Session holds one pooled connection for a
// run of mails (a digest batch), so the batch pays for one connection,
// TLS handshake and AUTH, not one per mail; SES takes one mail per call.
//
// Composing the mail from templates and Markdown is mailer's, which this
// package may not import (channels are peers over the seam); mailer signs
// through its own two-method Signer, which DKIM satisfies, and the worker
// joins composer and transport (worker/email.go). Reports coming back
// (bounces, complaints) are feedback's.
package email
