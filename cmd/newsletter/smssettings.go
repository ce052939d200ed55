package main

import (
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/phone"
)

// smsAuthToken checks the SMS gateway's callbacks; empty without SMS.
func smsAuthToken(c *config.Config) string {
	if c.SMS == nil {
		return ""
	}
	return c.SMS.AuthToken
}

// smsCountries are the countries numbers may be given for; none without
// SMS.
func smsCountries(c *config.Config) phone.Countries {
	if c.SMS == nil {
		return nil
	}
	return c.SMS.Countries
}

// smsCodesPerClient caps the codes a client address has texted in an
// hour; 0 (the default) without SMS.
func smsCodesPerClient(c *config.Config) int {
	if c.SMS == nil {
		return 0
	}
	return c.SMS.CodesPerClient
}

// smsMaxSegments caps an event's text at intake; 0 without SMS.
func smsMaxSegments(c *config.Config) int {
	if c.SMS == nil {
		return 0
	}
	return c.SMS.MaxSegments
}
