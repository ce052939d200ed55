package phone

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Error is a phone number Parse refused. Reason is a short
// sentence for the person who typed the number (the API answers it in
// its 400).
type Error struct {
	Input  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("phone number %q: %s", e.Input, e.Reason)
}

// maxNumberInput bounds what is handed to the parser: a phone number with
// spaces and punctuation fits in far less, and the input comes from anyone.
const maxNumberInput = 64

// Parse reads a phone number as a person types it ("+44 7400
// 123456", "07400 123456" with defaultRegion "GB") and answers it in
// E.164 ("+447400123456"), the one form stored and sent to the gateway.
// defaultRegion is an ISO 3166 code for numbers written without their
// country code; "" accepts only numbers that start with "+".
//
// Only numbers that can receive an SMS are accepted: those the library
// (libphonenumber's metadata, through github.com/nyaruka/phonenumbers)
// types MOBILE, or FIXED_LINE_OR_MOBILE where a country's numbering does
// not tell them apart (the United States and Canada). Every other type
// is refused, because the library can tell: FIXED_LINE (a landline),
// PREMIUM_RATE and SHARED_COST (they cost the sender, and are the target
// of SMS pumping fraud), TOLL_FREE and UAN (a business's line, not a
// reader's phone), VOIP (an internet number: many cannot receive SMS, and
// Twilio refuses or drops messages to those that cannot), PERSONAL_NUMBER
// (a forwarding service billed above a mobile rate), PAGER and VOICEMAIL.
// UNKNOWN would be accepted (the library cannot tell), but the library
// calls a number valid only when it matches one of the types above, so a
// valid number is never UNKNOWN today.
func Parse(raw, defaultRegion string) (string, error) {
	if len(raw) > maxNumberInput {
		return "", &Error{Input: raw[:maxNumberInput] + "…", Reason: "too long to be a phone number"}
	}
	n, err := phonenumbers.Parse(raw, defaultRegion)
	if err != nil {
		return "", &Error{Input: raw, Reason: parseReason(err, raw, defaultRegion)}
	}
	if !phonenumbers.IsValidNumber(n) {
		return "", &Error{Input: raw, Reason: invalidReason(n)}
	}
	if reason := refusedType(phonenumbers.GetNumberType(n)); reason != "" {
		return "", &Error{Input: raw, Reason: reason}
	}
	return phonenumbers.Format(n, phonenumbers.E164), nil
}

// parseReason says why the parser gave up, in the person's terms.
func parseReason(err error, raw, defaultRegion string) string {
	international := strings.HasPrefix(strings.TrimSpace(raw), "+")
	switch {
	case errors.Is(err, phonenumbers.ErrInvalidCountryCode) && !international && defaultRegion == "":
		return "write the number with its country code, starting with +"
	case errors.Is(err, phonenumbers.ErrInvalidCountryCode):
		return "the country code is not one that exists"
	case errors.Is(err, phonenumbers.ErrTooShortNSN), errors.Is(err, phonenumbers.ErrTooShortAfterIDD):
		return "too short to be a phone number"
	case errors.Is(err, phonenumbers.ErrNumTooLong):
		return "too long to be a phone number"
	default:
		return "not a phone number"
	}
}

// invalidReason says why a number that parsed is not one: the wrong
// length for its country, or a range no operator was given.
func invalidReason(n *phonenumbers.PhoneNumber) string {
	switch phonenumbers.IsPossibleNumberWithReason(n) {
	case phonenumbers.TOO_SHORT, phonenumbers.IS_POSSIBLE_LOCAL_ONLY:
		// Local-only: dialable within an area, its area code missing.
		return "too short for a number of its country"
	case phonenumbers.INVALID_LENGTH:
		return "the wrong length for a number of its country"
	case phonenumbers.TOO_LONG:
		return "too long for a number of its country"
	default:
		return "not a valid number for its region"
	}
}

// refusedType answers why a number of type t cannot take SMS, or ""
// when it can (see Parse).
func refusedType(t phonenumbers.PhoneNumberType) string {
	switch t {
	case phonenumbers.MOBILE, phonenumbers.FIXED_LINE_OR_MOBILE, phonenumbers.UNKNOWN:
		return ""
	case phonenumbers.FIXED_LINE:
		return "a landline cannot receive SMS"
	case phonenumbers.PREMIUM_RATE:
		return "premium-rate numbers are refused"
	case phonenumbers.SHARED_COST:
		return "shared-cost numbers are refused"
	case phonenumbers.TOLL_FREE:
		return "a toll-free number is a business line, not a mobile phone"
	case phonenumbers.UAN:
		return "a company's universal access number is not a mobile phone"
	case phonenumbers.VOIP:
		return "an internet (VoIP) number cannot be relied on to receive SMS"
	case phonenumbers.PERSONAL_NUMBER:
		return "personal (forwarding) numbers are refused"
	case phonenumbers.PAGER:
		return "a pager number is not a mobile phone"
	case phonenumbers.VOICEMAIL:
		return "a voicemail number cannot receive SMS"
	default:
		return "not a mobile number"
	}
}
