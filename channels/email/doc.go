// Package email is the e-mail channel's outgoing side: it carries a
// composed mail (envelope sender, recipient, the message's bytes) to the
// provider and says what the answer means. It owns the SMTP pool and its
// transaction (pipelined MAIL, RCPT and BDAT or DATA: one write and one
// round trip per mail where the server allows), the Amazon SES API
// client, DKIM signing, the server URL and its probe (`newsletter check`),
// and the classes of failure (SendError: retry, slow the domain, retire
// the address, alert the operator; PausedError: hold the lane).
//
// It answers the seam (channels.Channel) as Channel: a Message is one
// composed mail (To: the envelope recipient; Body: the mail's bytes,
// signed; Attrs[AttrFrom]: the envelope sender, the VERP return path),
// and Classify turns the transport's SendError classes (errors.go) into
// Verdicts: accepted is Sent (with the SMTP queue id or SES MessageId),
// a dead address (550 5.1.1) Retire, a refused message (552 5.3.4, 554
// 5.7.1) Drop, a 4xx or a network failure Retry, a refusal of our
// account (a login refused, 535 or 530; SES's AccessDenied) or SES's
// sending pause Pause.
//
// It batches as SMTP allows. Over SMTP a Send of up to MaxBatch mails
// takes one pooled connection for the whole batch, so the batch pays for
// one connection, TLS handshake and AUTH, not one per mail, and sends a
// transaction per mail on it: MAIL, RCPT and BDAT (or DATA) written
// together where the server offers PIPELINING (RFC 2920) and CHUNKING
// (RFC 3030), each reply read in order. Each mail keeps its own envelope
// (its VERP sender) and its own answer, which is why the batch is many
// transactions and not one transaction of many recipients: a refusal
// answers that mail alone, an RSET clears it, and the next mail goes on.
// A connection that breaks (a drop, a timeout, 421) answers Retry for
// the mail it broke on and, untried, for the rest (ErrNotSent): whether
// the server took that mail is unknown, and the lane's retry sends the
// rest on a new connection. A canceled ctx answers Retry for the mails
// not begun. Session is the same pooled connection for a caller that
// sends mail by mail (the worker's Deliverer, worker/email.go).
//
// SES takes one mail per call: SendEmail's raw content is one message to
// its Destination, and SES v2 has no call for many raw messages, so the
// SES channel has MaxBatch 1 and sends through channels.OneByOne, over
// the SDK's pool of kept-alive HTTPS connections. Its MaxBody is SES's
// 40 MB after base64 (SESMaxBody); the SMTP channel declares none, the
// relay's SIZE being its own (552 drops what is over it).
//
// Composing the mail from templates and Markdown is mailer's, which this
// package may not import (channels are peers over the seam); mailer signs
// through its own two-method Signer, which DKIM satisfies, and the worker
// joins composer and transport (worker/email.go). Reports coming back
// (bounces, complaints) are feedback's.
package email
