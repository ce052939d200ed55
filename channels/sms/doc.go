// Package sms sends text messages through a Twilio-compatible Messages
// API and reads what comes back: how many segments a text costs, the
// error classes of the gateway's answers, and the signed inbound messages
// (STOP, START, HELP) a reader sends.
//
// Numbers are read by internal/phone (phone.Parse, phone.Countries), a
// leaf the settings share: a number reaches this package already in
// E.164.
//
// Segments: an SMS carries 140 bytes. Measure counts a text in GSM-7
// septets (160 in one message, 153 a segment once concatenated, the
// extension characters ^{}\[~]|€ and form feed costing two) or, when a
// character falls outside GSM 03.38, in UCS-2 (70 UTF-16 code units
// alone, 67 a segment; an emoji outside the BMP costs two and is never
// split across segments). CheckLength caps a text with a *TooLongError.
//
// Sending: Client.Send posts one message (To, Body, and From or
// MessagingServiceSid) with Basic auth. The gateway's refusals map onto
// what a caller does next, as in package push: ErrNumberGone (the number
// is invalid, unreachable, not a mobile or the reader texted STOP:
// retire it, never retry), ErrUnavailable (429 or 5xx: retry, no sooner
// than RetryAfter), ErrRefused (anything else: bad credentials, a sender
// not allowed for the destination; retrying cannot help, but the number
// is not to blame). A network error or a timeout is none of these: retry
// it. Some failures arrive only later, in delivery status callbacks
// (30003 unreachable handset, 30005 unknown or inactive number, 30006
// landline or unreachable carrier, 30007 carrier filtering): this package
// sends no callback URL and so never sees them; a lane that wants them
// must add a status callback of its own.
//
// Channel is the channel as the worker's lane holds it (channels.Sender):
// Classify maps each of these answers to an Outcome (Retire, Drop, Retry
// with the gateway's Retry-After).
//
// What it batches, and why: nothing. Twilio's Messages API takes one
// message (one To) a POST and has no batch or bulk request for distinct
// texts to distinct numbers (a Messaging Service's queue is Twilio's,
// not ours to fill faster), so Channel's MaxBatch is 1 and it sends with
// channels.OneByOne. What runs at once is the lane's concurrency and its
// rate (NEWSLETTER_SMS_RATE), which are the sender's limits Twilio
// enforces with 429s.
//
// Inbound: ValidSignature checks X-Twilio-Signature (HMAC-SHA1 under the
// auth token, over the URL and the sorted form) and Keyword reads the
// opt-out, opt-in and help words a reader may send.
//
// internal/testkit/twiliotest is a Twilio-shaped server for tests,
// written without this package's code.
package sms
