package api

import (
	"errors"
	"fmt"

	"github.com/newsletter/newsletter/store"
)

// CheckDevice tells why platform and token cannot be a device, or nil.
// (Each platform's own shape check is its package's; until those land
// this holds the rule.)
func CheckDevice(platform, token string) error {
	switch platform {
	case store.PlatformFCM:
		if len(token) < 32 || len(token) > 4096 {
			return errors.New("an FCM registration token is 32 to 4096 characters")
		}
		for _, c := range token {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':') {
				return errors.New("an FCM registration token holds letters, digits, '_', '-' and ':' only")
			}
		}
		return nil
	case store.PlatformAPNs:
		if len(token) < 64 || len(token) > 200 || len(token)%2 != 0 {
			return errors.New("an APNs device token is 64 to 200 hexadecimal digits")
		}
		for _, c := range token {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return errors.New("an APNs device token is 64 to 200 hexadecimal digits")
			}
		}
		return nil
	case "":
		return errors.New(`want "platform": "fcm" or "apns"`)
	}
	return fmt.Errorf("unknown platform %q: want \"fcm\" or \"apns\"", platform)
}
