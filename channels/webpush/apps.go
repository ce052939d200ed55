package webpush

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/newsletter/newsletter/channels"
)

// SendApps is an app platform's Send (fcm.Channel, apns.Channel): each
// Message's Body is a Notification as JSON, sent to its To by send, all of
// the batch at once as concurrent requests (channels.Concurrently; the
// platform's Client keeps its connection's cap), each answer read by
// classify, in the batch's order. A body that is not a notification
// drops its message; a canceled ctx answers Retry for what was not sent.
func SendApps(ctx context.Context, platform string, batch []channels.Message,
	send func(ctx context.Context, to string, n Notification) error, classify func(error) channels.Outcome) []channels.Outcome {
	return channels.Concurrently(ctx, batch, 0, func(ctx context.Context, m channels.Message) channels.Outcome {
		var n Notification
		if err := json.Unmarshal(m.Body, &n); err != nil {
			return channels.Outcome{Verdict: channels.Drop, Err: fmt.Errorf("%s: the body is not a notification: %w", platform, err)}
		}
		return classify(send(ctx, m.To, n))
	})
}
