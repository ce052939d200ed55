package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// apiChannelChecks hands the API the channels' rules for what a client
// hands in, and the SMS channel's per-client cap counter (registered on
// reg, where the sms lane counts its daily caps): the API imports no
// channel package. pushServices are the hosts a browser's subscription
// may name (nil: any, with NEWSLETTER_WEBHOOK_ALLOW_PRIVATE).
func apiChannelChecks(reg prometheus.Registerer, pushServices []string) api.ChannelChecks {
	return api.ChannelChecks{
		DeviceTokens: map[string]func(string) error{
			store.PlatformFCM:  fcm.ValidToken,
			store.PlatformAPNs: apns.ValidToken,
		},
		PushFits:         []func(title, link string) error{webpush.CheckEvent, apnsFits, fcmFits},
		PushSubscription: browserPushSubscription(pushServices),
		SMSText:          sms.CheckLength,
		// Made at start, so the per-client series is exported at 0.
		SMSCodeCapped: sms.CapReachedMetric(reg).WithLabelValues(sms.CapPerClient).Inc,
	}
}

// apnsFits and fcmFits say whether an event's notification fits an APNs
// or FCM message.
func apnsFits(title, link string) error { return apns.Fits(apns.Notification{Title: title, URL: link}) }
func fcmFits(title, link string) error  { return fcm.Fits(fcm.Notification{Title: title, URL: link}) }

// browserPushSubscription reads and checks a browser's PushSubscription
// JSON (webpush.ParseSubscription) as the store keeps it: its endpoint at
// one of services (webpush.CheckService; nil: any host, which the
// address check judges alone).
func browserPushSubscription(services []string) func([]byte) (store.PushSubscription, error) {
	return func(b []byte) (store.PushSubscription, error) {
		sub, err := webpush.ParseSubscription(b)
		if err == nil && services != nil {
			err = webpush.CheckService(sub.Endpoint, services)
		}
		if err != nil {
			return store.PushSubscription{}, err
		}
		return store.PushSubscription{Endpoint: sub.Endpoint, P256DH: sub.P256DH, Auth: sub.Auth}, nil
	}
}

// browserPushServices are the hosts a browser's push subscription may name:
// the operator's list, else the browsers' own; none with private
// addresses allowed (tests and development, whose push services are
// local stand-ins).
func browserPushServices(c *config.Config) []string {
	switch {
	case c.WebhookAllowPrivate:
		return nil
	case c.PushServices != nil:
		return c.PushServices
	}
	return webpush.DefaultServices
}

// mountSMSCallbacks serves the SMS gateway's signed callbacks (STOP,
// START, a number's delivery status) beside the API, with SMS on: the
// handler, its body cap, signature check and replay keys are the SMS
// channel's; the numbers' states are the store's.
func mountSMSCallbacks(a *app, srv *api.Server, st sms.CallbackStore) {
	token := smsAuthToken(a.cfg.Config)
	if token == "" {
		return
	}
	srv.Handle("POST "+sms.CallbackPath, &sms.CallbackHandler{
		AuthToken: token, Origin: a.cfg.BaseURL, Store: st, Log: a.log,
		States: sms.NumberStates{Stopped: store.NumberStopped, On: store.NumberOn, Retired: store.NumberRetired},
	})
}

// mountProviderWebhooks serves each configured e-mail provider's bounce
// and complaint webhook at POST /webhooks/<name> beside the API: the
// handler, its body cap and the provider's verification are the e-mail
// channel's; the failure budget is the admin token's (a.guard), so
// guesses at a provider's secret and at the token count together.
func mountProviderWebhooks(a *app, srv *api.Server, queue tasks.Enqueuer) {
	for name, wh := range providerWebhooks(a) {
		srv.Handle("POST /webhooks/"+name, &feedback.WebhookHandler{
			Source: name, Webhook: wh, Queue: providerEvents{queue}, Failures: a.guard, Log: a.log,
		})
	}
}

// providerEvents queues a provider's events as feedback tasks
// (worker.FeedbackQueue); one no task can carry is feedback.ErrUnusable.
type providerEvents struct{ queue tasks.Enqueuer }

func (q providerEvents) Queue(ctx context.Context, ev feedback.Event) error {
	if _, err := tasks.NewFeedback(tasks.FeedbackPayload(ev)); err != nil {
		return fmt.Errorf("%w: %w", feedback.ErrUnusable, err)
	}
	return worker.FeedbackQueue{Queue: q.queue}.Consume(ctx, ev)
}
