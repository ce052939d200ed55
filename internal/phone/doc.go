// Package phone reads phone numbers and the lists of countries texts may
// go to: pure parsing on libphonenumber's metadata
// (github.com/nyaruka/phonenumbers), no I/O. It is a leaf, so that both
// the SMS channel and the settings (internal/config) check numbers the
// same way without the settings importing the channel.
//
// Parse normalises what a person types to E.164 and refuses what cannot
// take an SMS or costs the sender (landlines, premium-rate, shared-cost,
// toll-free, VoIP, pagers, ...), with an *Error whose Reason can be shown
// to the person. Countries, ParseCountries and SenderCountry are the
// countries a service texts (NEWSLETTER_SMS_COUNTRIES); IsSenderNumber
// is the shape of a sending number.
package phone
