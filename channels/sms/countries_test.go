package sms

import (
	"slices"
	"strings"
	"testing"
)

// A country list reads ISO 3166 codes in any case, once each; a code with
// no numbering plan, or no code, is refused naming it.
func TestParseCountries(t *testing.T) {
	got, err := ParseCountries(" us, Ca ,US,,gb")
	if err != nil || !slices.Equal(got, Countries{"US", "CA", "GB"}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", " , ", "US,XX", "USA", "EU"} {
		if c, err := ParseCountries(bad); err == nil {
			t.Errorf("%q: %v, want an error", bad, c)
		}
	}
	if _, err := ParseCountries("US,XX"); err == nil || !strings.Contains(err.Error(), `"XX"`) {
		t.Errorf("the refusal does not name the code: %v", err)
	}
}

// The sender's country: where its numbering plan places a number, the
// main country of its calling code for a number outside any range (as
// Twilio's test numbers are); none for a short code or a messaging
// service.
func TestSenderCountry(t *testing.T) {
	for from, want := range map[string]string{
		"+15005550006":  "US", // Twilio's test number: +1, no range
		"+14155552671":  "US",
		"+16135550123":  "CA",
		"+447400123456": "GB",
		"+33612345678":  "FR",
		"12345":         "",
		"MG0123456789":  "",
		"+":             "",
	} {
		if got := SenderCountry(from); got != want {
			t.Errorf("%s: %q, want %q", from, got, want)
		}
	}
}

// A number is allowed when its country is on the list; a North American
// number is told apart by its area code.
func TestCountriesAllows(t *testing.T) {
	c := Countries{"US", "GB"}
	for number, want := range map[string]bool{
		"+14155552671":   true,
		"+447400123456":  true,
		"+16135550123":   false, // Ottawa
		"+263711234567":  false, // Zimbabwe
		"+33612345678":   false,
		"not a number":   false,
		"+9999999999999": false,
	} {
		if got := c.Allows(number); got != want {
			t.Errorf("%s: %v, want %v", number, got, want)
		}
	}
	if !(Countries(nil)).Allows("+263711234567") {
		t.Error("no list refused a number")
	}
	if r := c.NotAllowed("+263711234567").Reason; !strings.Contains(r, "US, GB") {
		t.Errorf("the reason %q does not name the countries", r)
	}
}

// A status callback retires its number only for a failed or undelivered
// message with a permanent code; a passing code, or a permanent code on
// another status, does not.
func TestRetireStatus(t *testing.T) {
	for _, c := range []struct {
		status, code string
		want         bool
	}{
		{"undelivered", "30006", true}, {"failed", "30005", true}, {"failed", "21211", true},
		{"failed", "21610", true}, {"failed", "21614", true},
		{"undelivered", "30003", false}, {"undelivered", "30001", false}, {"failed", "30008", false},
		{"undelivered", "30007", false}, {"undelivered", "30004", false}, {"failed", "", false},
		{"sent", "30006", false}, {"delivered", "30006", false}, {"queued", "", false},
	} {
		if got := RetireStatus(c.status, c.code); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.status, c.code, got, c.want)
		}
	}
}
