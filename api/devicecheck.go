package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/store"
)

// CheckDevice tells why platform and token cannot be a device, or nil:
// each platform's package holds the shape of its tokens.
func CheckDevice(platform, token string) error {
	var err error
	switch platform {
	case store.PlatformFCM:
		err = fcm.ValidToken(token)
	case store.PlatformAPNs:
		err = apns.ValidToken(token)
	case "":
		return errors.New(`want "platform": "fcm" or "apns"`)
	default:
		return fmt.Errorf("unknown platform %q: want \"fcm\" or \"apns\"", platform)
	}
	if err != nil {
		// The packages class a bad token as a gone one (a stored token
		// of the wrong shape is deleted); to the caller it is a reason.
		return errors.New(strings.TrimPrefix(err.Error(), webpush.ErrGone.Error()+": "))
	}
	return nil
}

// pushable says whether an event's notification fits the message of
// every push platform: a browser's (push.CheckEvent), APNs' and FCM's.
// Each shortens the title to fit, so only a URL too long is refused; the
// limits differ (APNs and FCM escape &, < and > in JSON, a browser's
// plaintext does not), so each is asked.
func pushable(title, link string) error {
	if err := webpush.CheckEvent(title, link); err != nil {
		return err
	}
	if err := apns.Fits(apns.Notification{Title: title, URL: link}); err != nil {
		return err
	}
	return fcm.Fits(fcm.Notification{Title: title, URL: link})
}
