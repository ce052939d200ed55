package phone_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/phone"
)

func TestParseNumberAccepts(t *testing.T) {
	for _, c := range []struct{ raw, region, want string }{
		{"+44 7400 123456", "", "+447400123456"},     // UK mobile
		{"07400 123456", "GB", "+447400123456"},      // national form, region given
		{"+44 (0)7400-123-456", "", "+447400123456"}, // the UK habit of (0)
		{"0044 7400 123456", "GB", "+447400123456"},  // international prefix
		{"+1 415 555 2671", "", "+14155552671"},      // US: FIXED_LINE_OR_MOBILE
		{"(415) 555-2671", "US", "+14155552671"},     // US national form
		{"+49 1512 3456789", "", "+4915123456789"},   // German mobile
		{"+33 6 12 34 56 78", "", "+33612345678"},    // French mobile
		{"06 12 34 56 78", "FR", "+33612345678"},     // French national form
		{"+61 412 345 678", "", "+61412345678"},      // Australian mobile
		{"+81 90 1234 5678", "", "+819012345678"},    // Japanese mobile
		{"+55 11 91234 5678", "", "+5511912345678"},  // Brazilian mobile
		{"+91 98765 43210", "", "+919876543210"},     // Indian mobile
		{"+44 7400 123456", "FR", "+447400123456"},   // + wins over the region
		{"  +447400123456  ", "", "+447400123456"},   // already E.164, spaced
	} {
		got, err := phone.Parse(c.raw, c.region)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q, %q) = %q, %v; want %q", c.raw, c.region, got, err, c.want)
		}
	}
}

func TestParseNumberRefuses(t *testing.T) {
	for _, c := range []struct{ raw, region, reason string }{
		{"", "", "not a phone number"},
		{"hello", "GB", "not a phone number"},
		{"07400 123456", "", "country code"}, // national form, no region
		{"+999 1234 5678", "", "country code is not one that exists"},
		{"+44 7400 12345", "", "not a valid number for its region"}, // a digit missing
		{"+44 7400", "", "too short"},                               // a local number, its area missing
		{"+1 415 555", "", "too short"},
		{"+44 7400 1234567", "", "too long"},                      // a digit too many
		{"+44 20 7946 0958", "", "a landline cannot receive SMS"}, // London
		{"+49 30 12345678", "", "a landline"},                     // Berlin
		{"+33 1 23 45 67 89", "", "a landline"},                   // Paris
		{"+61 2 9876 5432", "", "a landline"},                     // Sydney
		{"+1 900 555 0123", "", "premium-rate numbers are refused"},
		{"+44 909 876 5432", "", "premium-rate"},
		{"+33 8 99 12 34 56", "", "premium-rate"},
		{"+34 803 123 456", "", "premium-rate"},
		{"+33 884 01 23 45", "", "shared-cost"},
		{"+49 180 1 2345", "", "shared-cost"},
		{"+1 800 555 0199", "", "toll-free"},
		{"+44 800 123 4567", "", "toll-free"},
		{"+44 56 1234 5678", "", "VoIP"},
		{"+33 9 12 34 56 78", "", "VoIP"},
		{"+44 70 1234 5678", "", "personal"},
		{"+44 76 4012 3456", "", "pager"},
		{"+44 55 1234 5678", "", "universal access"},
		{"+49 177 99 1234567", "", "voicemail"},
		{"+44 " + strings.Repeat("7", 80), "", "too long"},
	} {
		got, err := phone.Parse(c.raw, c.region)
		var ne *phone.Error
		if !errors.As(err, &ne) {
			t.Errorf("Parse(%q, %q) = %q, %v; want a *phone.Error", c.raw, c.region, got, err)
			continue
		}
		if !strings.Contains(ne.Reason, c.reason) {
			t.Errorf("Parse(%q, %q): reason %q, want it to say %q", c.raw, c.region, ne.Reason, c.reason)
		}
		if got != "" {
			t.Errorf("Parse(%q, %q) answered %q beside its error", c.raw, c.region, got)
		}
		if len(ne.Input) > 70 {
			t.Errorf("Parse(%q): the error carries %d bytes of input, want it cut short", c.raw[:10], len(ne.Input))
		}
	}
}
