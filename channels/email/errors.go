package email

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"
)

// Class says what a failed send means for the message and the address.
type Class int

// The classes of failure. The string of each is the metric reason label.
const (
	// Temporary: a 4xx, a dropped connection or a timeout. Retry with
	// backoff.
	Temporary Class = iota
	// Throttled: the receiver asks us to slow down (421, 450, 4.7.x, 454
	// throttling). Retry later, and slow the whole domain.
	Throttled
	// Bounced: the address does not exist (5.1.x, 5.2.1, 550 on RCPT).
	// Never mail it again.
	Bounced
	// Rejected: the receiver refuses us, not the address (5.7.x policy or
	// authentication, 5.3.4 too big, 535). The address is kept; an operator
	// must act.
	Rejected
	// Invalid: the message itself could not be built or sent (bad address
	// syntax, template error). Retrying cannot help.
	Invalid
)

func (c Class) String() string {
	return [...]string{"temporary", "throttled", "bounced", "rejected", "invalid"}[c]
}

// Classes lists every class of failure.
func Classes() []Class { return []Class{Temporary, Throttled, Bounced, Rejected, Invalid} }

// SendError is every error a transport returns, and every error of the
// worker's mailer (composition failures are Invalid).
type SendError struct {
	Class    Class
	Code     int    // SMTP reply code, 0 for network errors
	Enhanced string // enhanced status code such as 5.1.1, if the server sent one
	Domain   string // recipient's domain, for logs that must not carry the address
	// RetryAfter, when positive, is how long the receiver asked us to wait.
	RetryAfter time.Duration
	Err        error
}

func (e *SendError) Error() string {
	code := ""
	if e.Code != 0 {
		code = fmt.Sprintf(" %d", e.Code)
		if e.Enhanced != "" {
			code += " " + e.Enhanced
		}
	}
	return fmt.Sprintf("send to @%s: %s%s: %v", e.Domain, e.Class, code, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// Temporary reports whether a later attempt can succeed.
func (e *SendError) Temporary() bool { return e.Class == Temporary || e.Class == Throttled }

// PausedError means the transport refuses every message for now (SES's
// sending pause): neither the message's fault nor the address's. The
// worker stops sending until In has passed, and does not count the
// postponed tasks as failed (RetryAfter).
type PausedError struct {
	Reason string
	In     time.Duration
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("transport paused for %s: %s", e.In, e.Reason)
}

// RetryAfter is when to try again.
func (e *PausedError) RetryAfter() time.Duration { return e.In }

// AsPaused returns the *PausedError in err's chain, or nil.
func AsPaused(err error) *PausedError {
	var pe *PausedError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// AsSendError returns the *SendError in err's chain, or nil.
func AsSendError(err error) *SendError {
	var se *SendError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// classify turns a transaction's error (transaction.go) into a SendError:
// from the reply code, the enhanced code, the step and the text. A network
// failure (code 0) is temporary.
func classify(err error, domain string) *SendError {
	out := &SendError{Class: Temporary, Domain: domain, Err: err}
	var re *replyError
	if !errors.As(err, &re) {
		return out // dial failure, context, network: retry
	}
	out.Code, out.Enhanced = re.code, enhancedFromText(re.msg)
	out.Class = classifyReply(out.Code, out.Enhanced, re.step == "RCPT", strings.ToLower(re.msg))
	return out
}

// classifyReply implements the table of the mail-delivery issue: RFC 5321
// reply codes refined by RFC 3463 enhanced codes.
func classifyReply(code int, enhanced string, atRcpt bool, text string) Class {
	switch {
	case code == 0:
		return Temporary
	case code == 421, code == 450,
		code/100 == 4 && strings.HasPrefix(enhanced, "4.7."),
		code == 454 && strings.Contains(text, "throttl"):
		return Throttled
	case code/100 == 4:
		return Temporary
	// 552 on RCPT is "too many recipients / storage" and RFC 5321
	// 4.5.3.1.10 says to treat it as temporary.
	case code == 552 && atRcpt:
		return Temporary
	case code == 535, strings.HasPrefix(enhanced, "5.7."), enhanced == "5.3.4":
		return Rejected
	case isBadAddress(enhanced), code == 550 && atRcpt && enhanced == "":
		return Bounced
	case code/100 == 5:
		return Rejected
	}
	return Temporary
}

func isBadAddress(enhanced string) bool {
	switch enhanced {
	case "5.1.1", "5.1.2", "5.1.3", "5.1.6", "5.1.10", "5.2.1":
		return true
	}
	return false
}

// enhancedFromText finds "d.d.d" after the reply code when the server did not
// announce ENHANCEDSTATUSCODES but sent one anyway.
func enhancedFromText(s string) string {
	for _, f := range strings.Fields(s) {
		parts := strings.Split(strings.TrimRight(f, ":,;"), ".")
		if len(parts) != 3 || len(parts[0]) != 1 || (parts[0] != "4" && parts[0] != "5") {
			continue
		}
		ok := true
		for _, p := range parts[1:] {
			if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
				ok = false
			}
		}
		if ok {
			return strings.TrimRight(f, ":,;")
		}
	}
	return ""
}

// authRefused reports a refusal of our account rather than of the mail:
// a relay's refusal of our login, or of mail without one (535 credentials
// invalid, 534 mechanism too weak, 530 authentication required; as the
// reply to AUTH when dialling or to MAIL in a transaction), or SES's
// (sesAccountRefusals). Every mail meets the same answer until an
// operator fixes the credentials or the account (Classify pauses the
// lane).
func authRefused(err error) bool {
	code := 0
	var re *replyError
	var te *textproto.Error
	switch {
	case errors.As(err, &re):
		code = re.code
	case errors.As(err, &te):
		code = te.Code
	}
	return code == 530 || code == 534 || code == 535 || sesRefusesAccount(err)
}
