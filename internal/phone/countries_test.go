package phone

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

// A sender is a number in E.164 or a short code; a name, a number
// without its +, or one too long is not.
func TestIsSenderNumber(t *testing.T) {
	for from, want := range map[string]bool{
		"+15005550006":      true,
		"+447400123456":     true,
		"12345":             true,
		"123":               true,
		"12":                false,
		"123456789":         false,
		"+0123456789":       false,
		"+1234567890123456": false,
		"our shop":          false,
		"MG0123456789":      false,
		"":                  false,
	} {
		if got := IsSenderNumber(from); got != want {
			t.Errorf("%q: %v, want %v", from, got, want)
		}
	}
}
