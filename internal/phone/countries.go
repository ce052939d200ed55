package phone

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Countries are the countries whose numbers may be given for texts
// (NEWSLETTER_SMS_COUNTRIES): ISO 3166 alpha-2 codes, upper case. SMS
// pumping fraud asks for texts to numbers in countries where a text
// costs most; a list of the countries the service is for closes those.
type Countries []string

// ParseCountries reads a comma-separated list of ISO 3166 codes ("US,CA"),
// any case, white space aside. A code libphonenumber has no numbering
// plan for, or an empty list, is an error.
func ParseCountries(list string) (Countries, error) {
	supported := phonenumbers.GetSupportedRegions()
	var out Countries
	for part := range strings.SplitSeq(list, ",") {
		code := strings.ToUpper(strings.TrimSpace(part))
		if code == "" {
			continue
		}
		if !supported[code] {
			return nil, fmt.Errorf("%q is not an ISO 3166 country code with a numbering plan", code)
		}
		if !slices.Contains(out, code) {
			out = append(out, code)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no country given")
	}
	return out, nil
}

// SenderCountry is the country of a sending number in E.164 (the country
// its numbering plan places it in, or the main country of its calling
// code when the number is outside any range, as Twilio's test numbers
// are); "" for a short code or a messaging service's id, which say
// nothing of a country.
func SenderCountry(from string) string {
	if !strings.HasPrefix(from, "+") {
		return ""
	}
	n, err := phonenumbers.Parse(from, "")
	if err != nil {
		return ""
	}
	if region := phonenumbers.GetRegionCodeForNumber(n); region != "" && region != "ZZ" {
		return region
	}
	if region := phonenumbers.GetRegionCodeForCountryCode(int(n.GetCountryCode())); region != "ZZ" {
		return region
	}
	return ""
}

// Country is the country of an E.164 number as Parse answers it
// ("" when it has none).
func Country(number string) string {
	n, err := phonenumbers.Parse(number, "")
	if err != nil {
		return ""
	}
	if region := phonenumbers.GetRegionCodeForNumber(n); region != "ZZ" {
		return region
	}
	return ""
}

// Allows reports whether number (E.164) belongs to one of the countries.
// No list allows every number (SMS off, or a caller that does not check).
func (c Countries) Allows(number string) bool {
	return len(c) == 0 || slices.Contains(c, Country(number))
}

// NotAllowed is the person's reason for a number of a country not on
// the list.
func (c Countries) NotAllowed(number string) *Error {
	return &Error{Input: number, Reason: "we send texts only to numbers in " + strings.Join(c, ", ")}
}
