package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/newsletter/newsletter/store"
)

// ChannelChecks are the channels' rules for what a client hands in: a
// device's token, a browser's push subscription, an event's title and
// link. Each channel package holds its own shapes and limits; the binary
// hands them in here, so the API imports no channel package.
type ChannelChecks struct {
	// DeviceTokens check a token's shape, by platform (store.PlatformFCM,
	// store.PlatformAPNs); a platform not here is refused.
	DeviceTokens map[string]func(token string) error
	// PushFits are each push platform's check that an event's
	// notification fits its message (a browser's, APNs', FCM's).
	PushFits []func(title, link string) error
	// PushSubscription reads and checks a browser's PushSubscription
	// JSON; it does not judge the endpoint's host (Config.Endpoints does).
	PushSubscription func(json []byte) (store.PushSubscription, error)
	// SMSText tells why text does not fit maxSegments segments of a
	// text message, or nil.
	SMSText func(text string, maxSegments int) error
	// SMSCodeCapped counts a code refused at the per-client cap
	// (newsletter_sms_cap_reached_total{cap="per_client"}: the SMS
	// channel owns the family, which its lane counts into too; nil:
	// not counted).
	SMSCodeCapped func()
}

// checkDevice tells why platform and token cannot be a device, or nil.
func (s *Server) checkDevice(platform, token string) error {
	valid, known := s.deps.Checks.DeviceTokens[platform]
	switch {
	case platform == "":
		return errors.New(`want "platform": "fcm" or "apns"`)
	case !known:
		return fmt.Errorf("unknown platform %q: want \"fcm\" or \"apns\"", platform)
	}
	if err := valid(token); err != nil {
		// The channels class a bad token as a gone one (a stored token of
		// the wrong shape is deleted); to the caller it is a reason.
		return errors.New(withoutClass(err))
	}
	return nil
}

// withoutClass is err's message without the prefix of the error at the
// root of its chain ("push subscription is gone: not an FCM registration
// token: …" is "not an FCM registration token: …").
func withoutClass(err error) string {
	root := err
	for next := errors.Unwrap(root); next != nil; next = errors.Unwrap(next) {
		root = next
	}
	if root == err {
		return err.Error()
	}
	return strings.TrimPrefix(err.Error(), root.Error()+": ")
}

// pushable says whether an event's notification fits the message of
// every push platform. Each shortens the title to fit, so only a URL too
// long is refused; the limits differ (APNs and FCM escape &, < and > in
// JSON, a browser's plaintext does not), so each is asked.
func (s *Server) pushable(title, link string) error {
	for _, fits := range s.deps.Checks.PushFits {
		if err := fits(title, link); err != nil {
			return err
		}
	}
	return nil
}
