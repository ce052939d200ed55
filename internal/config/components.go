package config

import (
	"time"

	"github.com/newsletter/newsletter/internal/topics"
)

// Defaults are the defaults of the settings whose value belongs to the
// component that uses it (worker.DefaultDigestBatch, fcm.DefaultBaseURL,
// ...): the command hands them in, so that each is stated once, in its
// component, and config imports none of them.
type Defaults struct {
	FeedsInterval    time.Duration // NEWSLETTER_FEEDS_INTERVAL
	DigestBatch      int           // NEWSLETTER_DIGEST_BATCH
	DigestMaxPending int           // NEWSLETTER_DIGEST_MAX_PENDING
	ClaimTTL         time.Duration // NEWSLETTER_CLAIM_TTL
	RetryBase        time.Duration // NEWSLETTER_RETRY_BASE
	SoftBounceLimit  int           // NEWSLETTER_SOFT_BOUNCE_LIMIT
	// FCMURL, APNsURL and SMSURL are the platforms' origins.
	FCMURL, APNsURL, SMSURL string
	// The SMS caps: NEWSLETTER_SMS_MAX_SEGMENTS, _PER_NUMBER_DAY,
	// _PER_DAY and _CODES_PER_CLIENT.
	SMSMaxSegments, SMSPerNumberDay, SMSPerDay, SMSCodesPerClient int
	// Engagement is NEWSLETTER_ENGAGEMENT's mode; Lanes the
	// comma-separated lanes of NEWSLETTER_LANES.
	Engagement, Lanes string
}

// Parsers read the settings whose types belong to components (the SMTP
// server, the web push and app platforms' keys, the test recipients, the
// lanes, the templates): the command supplies them and keeps what they
// parse. Parse calls each where it checks that setting, so the error
// lines keep one order whoever parses; each answers its line (Invalid)
// or nil. A nil parser skips the check: the value is only read.
type Parsers struct {
	// Engagement is NEWSLETTER_ENGAGEMENT, lower case.
	Engagement func(mode string) error
	// VAPID is called with all three of NEWSLETTER_VAPID_PUBLIC_KEY,
	// _PRIVATE_KEY and _SUBJECT set.
	VAPID func(publicKey, privateKey, subject string) error
	// FCMCredentials is called when NEWSLETTER_FCM_CREDENTIALS_FILE is set.
	FCMCredentials func(file string) error
	// APNsKey is called with all four of NEWSLETTER_APNS_KEY_FILE,
	// _KEY_ID, _TEAM_ID and _TOPIC set.
	APNsKey func(file, keyID, teamID, topic string) error
	// Lanes is NEWSLETTER_LANES or Defaults.Lanes.
	Lanes func(list string) error
	// SendGridKey is called when NEWSLETTER_SENDGRID_PUBLIC_KEY is set.
	SendGridKey func(key string) error
	// SMTPServer is called when NEWSLETTER_SMTP_URL is set.
	SMTPServer func(url string) error
	// TestRecipients is NEWSLETTER_TEST_RECIPIENTS, empty too.
	TestRecipients func(list string) error
	// Templates checks that the templates of NEWSLETTER_TEMPLATE_DIR (""
	// the built-in ones) cover every step of set.
	Templates func(dir string, set *topics.Set) error
}
