package config

import (
	"strings"

	"github.com/newsletter/newsletter/internal/phone"
)

// sms reads the SMS gateway's settings: NEWSLETTER_SMS_ACCOUNT_SID,
// _AUTH_TOKEN and _FROM together, or none of them (SMS off).
func (p *parser) sms() *SMS {
	c := &SMS{
		URL:            p.str("NEWSLETTER_SMS_URL", p.defaults.SMSURL),
		AccountSID:     p.str("NEWSLETTER_SMS_ACCOUNT_SID", ""),
		AuthToken:      p.str("NEWSLETTER_SMS_AUTH_TOKEN", ""),
		From:           p.str("NEWSLETTER_SMS_FROM", ""),
		MaxSegments:    p.integer("NEWSLETTER_SMS_MAX_SEGMENTS", p.defaults.SMSMaxSegments, 1),
		PerNumberDay:   p.integer("NEWSLETTER_SMS_PER_NUMBER_DAY", p.defaults.SMSPerNumberDay, 1),
		PerDay:         p.integer("NEWSLETTER_SMS_PER_DAY", p.defaults.SMSPerDay, 1),
		CodesPerClient: p.integer("NEWSLETTER_SMS_CODES_PER_CLIENT", p.defaults.SMSCodesPerClient, 1),
	}
	p.check("NEWSLETTER_SMS_URL", strings.HasPrefix(c.URL, "https://") || strings.HasPrefix(c.URL, "http://"), "an http(s) URL")
	vars := [][2]string{{"NEWSLETTER_SMS_ACCOUNT_SID", c.AccountSID}, {"NEWSLETTER_SMS_AUTH_TOKEN", c.AuthToken}, {"NEWSLETTER_SMS_FROM", c.From}}
	if !p.together(vars, "set: SMS needs NEWSLETTER_SMS_ACCOUNT_SID, _AUTH_TOKEN and _FROM together (or none of them for no SMS)") {
		return nil
	}
	// A messaging service's id (MG…) is Twilio's, not a number.
	p.check("NEWSLETTER_SMS_FROM", strings.HasPrefix(c.From, "MG") || phone.IsSenderNumber(c.From),
		"the sending number in E.164 (+15005550006), a short code, or a messaging service's id (MG…)")
	c.Countries = p.smsCountries(c.From)
	return c
}

// smsCountries reads NEWSLETTER_SMS_COUNTRIES; unset, the country of the
// sending number, which is where a number's texts are cheap and lawful.
// A short code or a messaging service names no country: the list must
// then be given, so that SMS is never open to every country by default.
func (p *parser) smsCountries(from string) phone.Countries {
	list := p.str("NEWSLETTER_SMS_COUNTRIES", "")
	if list == "" {
		if country := phone.SenderCountry(from); country != "" {
			return phone.Countries{country}
		}
		p.check("NEWSLETTER_SMS_COUNTRIES", false,
			"set when NEWSLETTER_SMS_FROM is a short code or a messaging service (MG…): the ISO 3166 codes of the countries texts may go to (US,CA)")
		return nil
	}
	countries, err := phone.ParseCountries(list)
	if err != nil {
		p.check("NEWSLETTER_SMS_COUNTRIES", false, "comma-separated ISO 3166 country codes (US,CA): "+err.Error())
	}
	return countries
}

// fcm reads FCM's URL and has its service account's key
// (NEWSLETTER_FCM_CREDENTIALS_FILE; none: FCM off) loaded.
func (p *parser) fcm() string {
	url := p.str("NEWSLETTER_FCM_URL", p.defaults.FCMURL)
	p.check("NEWSLETTER_FCM_URL", strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://"), "an http(s) URL")
	if path := p.str("NEWSLETTER_FCM_CREDENTIALS_FILE", ""); path != "" {
		p.parse(p.parsers.FCMCredentials, path)
	}
	return url
}

// apns reads APNs' URL and has its provider key loaded:
// NEWSLETTER_APNS_KEY_FILE, _KEY_ID, _TEAM_ID and _TOPIC together, or
// none of them (APNs off).
func (p *parser) apns() string {
	vars := [][2]string{
		{"NEWSLETTER_APNS_KEY_FILE", p.str("NEWSLETTER_APNS_KEY_FILE", "")},
		{"NEWSLETTER_APNS_KEY_ID", p.str("NEWSLETTER_APNS_KEY_ID", "")},
		{"NEWSLETTER_APNS_TEAM_ID", p.str("NEWSLETTER_APNS_TEAM_ID", "")},
		{"NEWSLETTER_APNS_TOPIC", p.str("NEWSLETTER_APNS_TOPIC", "")},
	}
	url := p.str("NEWSLETTER_APNS_URL", p.defaults.APNsURL)
	p.check("NEWSLETTER_APNS_URL", strings.HasPrefix(url, "https://"), "an https URL (APNs speaks HTTP/2 over TLS)")
	if p.together(vars, "set: APNs needs NEWSLETTER_APNS_KEY_FILE, _KEY_ID, _TEAM_ID and _TOPIC together (or none of them for no APNs)") &&
		p.parsers.APNsKey != nil {
		if err := p.parsers.APNsKey(vars[0][1], vars[1][1], vars[2][1], vars[3][1]); err != nil {
			p.errs = append(p.errs, err)
		}
	}
	return url
}

// vapid has the web push identity loaded: all three variables or none.
func (p *parser) vapid() {
	vars := [][2]string{
		{"NEWSLETTER_VAPID_PUBLIC_KEY", p.str("NEWSLETTER_VAPID_PUBLIC_KEY", "")},
		{"NEWSLETTER_VAPID_PRIVATE_KEY", p.str("NEWSLETTER_VAPID_PRIVATE_KEY", "")},
		{"NEWSLETTER_VAPID_SUBJECT", p.str("NEWSLETTER_VAPID_SUBJECT", "")},
	}
	if p.together(vars, "set: web push needs NEWSLETTER_VAPID_PUBLIC_KEY, NEWSLETTER_VAPID_PRIVATE_KEY and NEWSLETTER_VAPID_SUBJECT together (or none of them for no web push)") &&
		p.parsers.VAPID != nil {
		if err := p.parsers.VAPID(vars[0][1], vars[1][1], vars[2][1]); err != nil {
			p.errs = append(p.errs, err)
		}
	}
}

// media reads where uploaded images are kept; a bucket needs every one
// of its variables.
func (p *parser) media() Media {
	m := Media{Dir: p.str("NEWSLETTER_MEDIA_DIR", "media"), S3Endpoint: p.str("NEWSLETTER_MEDIA_S3_ENDPOINT", ""),
		S3Bucket: p.str("NEWSLETTER_MEDIA_S3_BUCKET", ""), S3Region: p.str("NEWSLETTER_MEDIA_S3_REGION", ""),
		S3AccessKey: p.str("NEWSLETTER_MEDIA_S3_ACCESS_KEY", ""), S3SecretKey: p.str("NEWSLETTER_MEDIA_S3_SECRET_KEY", ""),
		S3PublicURL: p.str("NEWSLETTER_MEDIA_S3_PUBLIC_URL", "")}
	if m.S3Endpoint == "" {
		return m
	}
	p.check("NEWSLETTER_MEDIA_S3_ENDPOINT", strings.HasPrefix(m.S3Endpoint, "https://") || strings.HasPrefix(m.S3Endpoint, "http://"), "an http(s) URL")
	p.check("NEWSLETTER_MEDIA_S3_PUBLIC_URL", strings.HasPrefix(m.S3PublicURL, "https://") || strings.HasPrefix(m.S3PublicURL, "http://"),
		"the http(s) URL readers fetch the bucket's images from, with NEWSLETTER_MEDIA_S3_ENDPOINT")
	for _, v := range [][2]string{{"NEWSLETTER_MEDIA_S3_BUCKET", m.S3Bucket}, {"NEWSLETTER_MEDIA_S3_ACCESS_KEY", m.S3AccessKey}, {"NEWSLETTER_MEDIA_S3_SECRET_KEY", m.S3SecretKey}} {
		p.check(v[0], v[1] != "", "set, with NEWSLETTER_MEDIA_S3_ENDPOINT")
	}
	return m
}
