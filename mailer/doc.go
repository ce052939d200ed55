// Package mailer turns a mail kind and its data into a message and delivers
// it: over SMTP through a pool of reused connections, through an ESP's API
// (Amazon SES: the same composed bytes, see Composed and RawSender), or
// into the in-memory dev mailbox. Only workers import it; the API never sends mail.
//
// Every failure comes back as a *SendError whose Class tells the handler
// what to do: retry, retry later and slow down, stop mailing the address, or
// alert the operator.
package mailer
