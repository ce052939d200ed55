package api

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// testChannelChecks are the channels' checks as the binary hands them in
// (cmd/newsletter's apiChannelChecks), the per-client cap counted on reg
// (nil: not registered).
func testChannelChecks(reg prometheus.Registerer) ChannelChecks {
	return ChannelChecks{
		DeviceTokens: map[string]func(string) error{store.PlatformFCM: fcm.ValidToken, store.PlatformAPNs: apns.ValidToken},
		PushFits: []func(title, link string) error{
			webpush.CheckEvent,
			func(title, link string) error { return apns.Fits(apns.Notification{Title: title, URL: link}) },
			func(title, link string) error { return fcm.Fits(fcm.Notification{Title: title, URL: link}) },
		},
		PushSubscription: func(b []byte) (store.PushSubscription, error) {
			sub, err := webpush.ParseSubscription(b)
			return store.PushSubscription{Endpoint: sub.Endpoint, P256DH: sub.P256DH, Auth: sub.Auth}, err
		},
		SMSText:       sms.CheckLength,
		SMSCodeCapped: sms.CapReachedMetric(reg).WithLabelValues(sms.CapPerClient).Inc,
	}
}

// testProviderEvents queue a provider's events as feedback tasks, as
// cmd/newsletter's providerEvents do.
type testProviderEvents struct{ queue tasks.Enqueuer }

func (q testProviderEvents) Queue(ctx context.Context, ev feedback.Event) error {
	if _, err := tasks.NewFeedback(tasks.FeedbackPayload(ev)); err != nil {
		return fmt.Errorf("%w: %w", feedback.ErrUnusable, err)
	}
	return worker.FeedbackQueue{Queue: q.queue}.Consume(ctx, ev)
}
