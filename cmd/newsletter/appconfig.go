package main

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// appConfig is the configuration as the app is assembled from it: the
// plain settings internal/config parses, and those whose types belong to
// the components, parsed here by the components' own parsers (config
// imports no component, so that internal/ stays below them).
type appConfig struct {
	*config.Config
	// SMTP is NEWSLETTER_SMTP_URL parsed; nil: the dev mailbox (or SES).
	SMTP *email.Server
	// TestGate is NEWSLETTER_TEST_RECIPIENTS parsed: the addresses any
	// test send may reach besides the account's own.
	TestGate *issues.TestGate
	// Engagement is NEWSLETTER_ENGAGEMENT: how the links in issues are
	// counted (engage.Aggregate, the default; engage.PerPerson also keeps
	// each person's clicks EngagementDays; engage.Off leaves links alone).
	Engagement engage.Mode
	// VAPID is the web push identity (NEWSLETTER_VAPID_PUBLIC_KEY,
	// _PRIVATE_KEY and _SUBJECT, all three or none); nil: web push off.
	VAPID *webpush.VAPID
	// FCM is Firebase Cloud Messaging's service account key
	// (NEWSLETTER_FCM_CREDENTIALS_FILE), used at FCMURL; nil: off.
	FCM *fcm.Credentials
	// APNs is Apple's push key and names, used at APNsURL; nil: off.
	APNs *apnsKey
	// SendGridKey is NEWSLETTER_SENDGRID_PUBLIC_KEY parsed; nil: the
	// SendGrid webhook is off.
	SendGridKey *ecdsa.PublicKey
	// Lanes are the lanes a worker serves (NEWSLETTER_LANES, default every
	// lane; `newsletter worker --lanes` overrides it).
	Lanes []string
	// added are the lanes of the channels added through the seam, by
	// name: their pools and rates (addedLaneSizes).
	added map[string]laneSize
}

// apnsKey is the APNs identity: the .p8 provider key
// (NEWSLETTER_APNS_KEY_FILE) with its key id, team id and the app's
// bundle id as topic (NEWSLETTER_APNS_KEY_ID, _TEAM_ID, _TOPIC).
type apnsKey struct {
	Key                  *ecdsa.PrivateKey
	KeyID, TeamID, Topic string
}

// componentDefaults are the defaults each component states for the
// settings it takes.
var componentDefaults = config.Defaults{
	FeedsInterval:     tasks.DefaultFeedsInterval,
	DigestBatch:       worker.DefaultDigestBatch,
	DigestMaxPending:  worker.DefaultMaxPendingBatches,
	ClaimTTL:          worker.DefaultClaimTTL,
	RetryBase:         worker.DefaultRetryBase,
	SoftBounceLimit:   store.DefaultSoftBounceLimit,
	FCMURL:            fcm.DefaultBaseURL,
	APNsURL:           apns.DefaultBaseURL,
	SMSURL:            sms.DefaultBaseURL,
	SMSMaxSegments:    worker.DefaultSMSMaxSegments,
	SMSPerNumberDay:   worker.DefaultSMSPerNumberDay,
	SMSPerDay:         worker.DefaultSMSPerDay,
	SMSCodesPerClient: sms.DefaultCodesPerClient,
	Engagement:        string(engage.Aggregate),
}

// loadConfig reads the environment through getenv (os.Getenv when nil):
// config.Parse with the components' defaults and parsers. The error, if
// any, has one line per bad variable.
func loadConfig(getenv func(string) string) (*appConfig, error) {
	ac := &appConfig{}
	defaults := componentDefaults
	// Every lane, the added channels' too (registered before this runs).
	defaults.Lanes = strings.Join(tasks.Lanes, ",")
	cfg, err := config.Parse(getenv, defaults, config.Parsers{
		Engagement:     ac.parseEngagement,
		VAPID:          ac.parseVAPID,
		FCMCredentials: ac.loadFCM,
		APNsKey:        ac.loadAPNs,
		Lanes:          ac.parseLanes,
		SendGridKey:    ac.parseSendGridKey,
		SMTPServer:     ac.parseSMTP,
		TestRecipients: ac.parseTestRecipients,
		Templates:      checkTemplates,
	})
	if err != nil {
		return nil, err
	}
	ac.Config = cfg
	if ac.added, err = addedLaneSizes(getenv, onChannels); err != nil {
		return nil, err
	}
	return ac, nil
}

func (ac *appConfig) parseEngagement(mode string) error {
	switch m := engage.Mode(mode); m {
	case engage.Aggregate, engage.PerPerson, engage.Off:
		ac.Engagement = m
		return nil
	}
	return config.Invalid("NEWSLETTER_ENGAGEMENT", "aggregate, per-person or off, got "+strconv.Quote(mode))
}

// parseVAPID names the variable at fault in each of webpush's refusals.
func (ac *appConfig) parseVAPID(publicKey, privateKey, subject string) error {
	v, err := webpush.NewVAPID(publicKey, privateKey, subject)
	switch {
	case err == nil:
		ac.VAPID = v
		return nil
	case errors.Is(err, webpush.ErrVAPIDPublicKey):
		return config.Invalid("NEWSLETTER_VAPID_PUBLIC_KEY", "the base64url public key that `newsletter vapid generate` prints (an uncompressed P-256 point)")
	case errors.Is(err, webpush.ErrVAPIDPrivateKey):
		return config.Invalid("NEWSLETTER_VAPID_PRIVATE_KEY", "the base64url private key that `newsletter vapid generate` prints (a 32-byte P-256 scalar)")
	case errors.Is(err, webpush.ErrVAPIDMismatch):
		return config.Invalid("NEWSLETTER_VAPID_PUBLIC_KEY", "the public key of NEWSLETTER_VAPID_PRIVATE_KEY: the two do not belong together (use the pair `newsletter vapid generate` printed)")
	case errors.Is(err, webpush.ErrVAPIDSubject):
		return config.Invalid("NEWSLETTER_VAPID_SUBJECT", "a contact for the push services: mailto:you@example.com or an https:// URL")
	}
	return fmt.Errorf("NEWSLETTER_VAPID_PUBLIC_KEY: %w", err)
}

func (ac *appConfig) loadFCM(file string) error {
	creds, err := fcm.LoadCredentials(file)
	if err != nil {
		return config.Invalid("NEWSLETTER_FCM_CREDENTIALS_FILE", "a Firebase service account's JSON key file: "+err.Error())
	}
	ac.FCM = creds
	return nil
}

func (ac *appConfig) loadAPNs(file, keyID, teamID, topic string) error {
	key, err := apns.LoadKey(file)
	if err != nil {
		return config.Invalid("NEWSLETTER_APNS_KEY_FILE", "Apple's .p8 push key (PEM, PKCS#8 P-256): "+err.Error())
	}
	ac.APNs = &apnsKey{Key: key, KeyID: keyID, TeamID: teamID, Topic: topic}
	return nil
}

func (ac *appConfig) parseLanes(list string) error {
	lanes, err := tasks.ParseLanes(list)
	if err != nil {
		return fmt.Errorf("NEWSLETTER_LANES: %w", err)
	}
	ac.Lanes = lanes
	return nil
}

// parseSendGridKey keeps the key: SendGrid's webhook checks each event's
// signature with it.
func (ac *appConfig) parseSendGridKey(b64 string) error {
	key, err := feedback.ParseSendGridKey(b64)
	if err != nil {
		return config.Invalid("NEWSLETTER_SENDGRID_PUBLIC_KEY", "the verification key SendGrid shows (base64 DER of an ECDSA public key)")
	}
	ac.SendGridKey = key
	return nil
}

func (ac *appConfig) parseSMTP(url string) error {
	srv, err := email.ParseServerURL(url)
	if err != nil {
		return config.Invalid("NEWSLETTER_SMTP_URL", "smtp://[user:pass@]host:port[?tls=none|starttls|tls]")
	}
	ac.SMTP = &srv
	return nil
}

func (ac *appConfig) parseTestRecipients(list string) error {
	gate, err := issues.NewTestGate(list)
	if err != nil {
		return config.Invalid("NEWSLETTER_TEST_RECIPIENTS", fmt.Sprintf("comma-separated addresses (%v)", err))
	}
	ac.TestGate = gate
	return nil
}

// checkTemplates renders nothing: it loads the templates as the worker
// will, so that a step without one stops every role at start-up.
func checkTemplates(dir string, set *topics.Set) error {
	if _, err := mailer.NewRenderer(dir, set.Templates()...); err != nil {
		return fmt.Errorf("NEWSLETTER_TEMPLATE_DIR / NEWSLETTER_TOPICS_FILE: %w", err)
	}
	return nil
}

// laneSizes are lane's pool size and its shared rate per second, each
// lane's pair of settings in one place.
func (ac *appConfig) laneSizes(lane string) (concurrency, rate int) {
	switch lane {
	case tasks.LanePush:
		return ac.PushConcurrency, ac.PushRate
	case tasks.LaneWebhook:
		return ac.WebhookConcurrency, ac.WebhookRate
	case tasks.LaneSMS:
		return ac.SMSConcurrency, ac.SMSRate
	}
	if l, ok := ac.added[lane]; ok {
		return l.concurrency, l.rate
	}
	return ac.Concurrency, ac.SendRate
}

// laneConcurrency is the size of lane's pool.
func (ac *appConfig) laneConcurrency(lane string) int {
	n, _ := ac.laneSizes(lane)
	return n
}

// laneRate is lane's shared rate per second.
func (ac *appConfig) laneRate(lane string) int {
	_, r := ac.laneSizes(lane)
	return r
}

// setLanes replaces Lanes with the comma-separated list s (`newsletter
// worker --lanes`), checked as NEWSLETTER_LANES is.
func (ac *appConfig) setLanes(s string) error {
	lanes, err := tasks.ParseLanes(s)
	if err != nil {
		return fmt.Errorf("--lanes: %w", err)
	}
	ac.Lanes = lanes
	return nil
}
