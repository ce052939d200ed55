package main

import (
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker"
)

// buildChannels hands the worker the channels this binary builds, one
// line each, each on when its configuration is: the one place where a
// channel package meets the worker (docs/architecture.md, "Adding a
// channel"). E-mail is not here: its transport is the e-mail lane's
// (lanes.setUpMail), made only by a process that sends mail.
func buildChannels(a *app, d *worker.Deps) {
	d.WebhookPost = webhook.NewSender(a.cfg.Endpoints()) // webhook: always on (admins add endpoints)
	d.Push, d.Services = pushSender(a), pushServices(a)  // webpush: with VAPID keys
	d.Apps = appGates(a)                                 // fcm, apns: each with its settings
	smsChannel(a, d)                                     // sms: with NEWSLETTER_SMS_*
	d.Channels = a.added                                 // the channels added through the seam (addedChannels)
}

// pushServices gate the browsers' push services: each may hold a quarter
// of the push lane's workers, as an app platform may.
func pushServices(a *app) *worker.ServiceGates {
	return &worker.ServiceGates{Slots: max(1, a.cfg.PushConcurrency/4)}
}

// smsChannel is the SMS gateway and its caps, with SMS configured.
func smsChannel(a *app, d *worker.Deps) {
	c := a.cfg.SMS
	if c == nil {
		return
	}
	d.SMS = &sms.Client{BaseURL: c.URL, AccountSID: c.AccountSID, AuthToken: c.AuthToken, From: c.From,
		StatusCallback: a.cfg.BaseURL + sms.CallbackPath}
	d.SMSLimits = worker.SMSLimits{MaxSegments: c.MaxSegments, PerNumberDay: c.PerNumberDay, PerDay: c.PerDay}
	d.Quiet = quiet.New(a.cfg.Quiet) // the reader's quiet hours hold texts too
}

// pushSender is the web push client, nil without VAPID keys: the push
// lane then runs nothing and its tasks wait in its queue for a worker
// that has them. It posts only to the push services a subscription may
// name (browserPushServices; a stored one elsewhere is retired).
func pushSender(a *app) webpush.Sender {
	if a.cfg.VAPID == nil {
		return nil
	}
	c := webpush.NewClient(a.cfg.VAPID, a.cfg.Endpoints().Client(pushLimits))
	if services := browserPushServices(a.cfg.Config); services != nil {
		return webpush.ServicesOnly{Sender: c, Services: services}
	}
	return c
}

// appGates are the app platforms this process can send to (FCM, APNs:
// each on when its settings are), each behind its own gate in the push
// lane (worker.AppGate); nil when neither is on.
func appGates(a *app) map[string]*worker.AppGate {
	gates := map[string]*worker.AppGate{}
	// Each platform may hold a quarter of the push lane's workers: a slow
	// one leaves the browsers and the other platform the rest.
	slots := max(1, a.cfg.PushConcurrency/4)
	if a.cfg.FCM != nil {
		c := &fcm.Client{Creds: a.cfg.FCM, BaseURL: a.cfg.FCMURL, HTTP: fcm.NewHTTPClient(a.cfg.PushCAs)}
		gates[store.PlatformFCM] = worker.NewAppGate(c, slots, 0)
		gates[store.PlatformFCM].Rate = pace.NewLane(a.rdb, "push:fcm", a.cfg.FCMRate)
	}
	if k := a.cfg.APNs; k != nil {
		c := &apns.Client{Key: k.Key, KeyID: k.KeyID, TeamID: k.TeamID, Topic: k.Topic, BaseURL: a.cfg.APNsURL,
			HTTP: apns.NewHTTPClient(a.cfg.PushCAs)}
		gates[store.PlatformAPNs] = worker.NewAppGate(c, slots, 0)
		gates[store.PlatformAPNs].Rate = pace.NewLane(a.rdb, "push:apns", a.cfg.APNsRate)
	}
	if len(gates) == 0 {
		return nil
	}
	return gates
}
