// Package mailer turns a mail kind and its data into a message and composes
// it: templates, Markdown, the MIME parts, the headers (Message-ID with the
// VERP tag, the List and Feedback-ID headers) and the DKIM signatures
// through a Signer (Composer), or keeps it in the in-memory dev mailbox.
// Carrying the bytes (SMTP, Amazon SES) and classifying the answers is
// channels/email's; the worker joins the two (worker/email.go). Only
// workers and commands import it; the API never sends mail.
package mailer
