package webpush

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// DefaultServices are the push services of the browsers that offer web
// push: Chrome, Edge, Opera, Brave and Samsung Internet (FCM), Firefox
// (Mozilla's autopush), Edge on Windows (WNS, one host a region) and
// Safari (Apple). An entry that begins with a dot takes any host under it.
var DefaultServices = []string{
	"fcm.googleapis.com",
	"updates.push.services.mozilla.com",
	".notify.windows.com",
	"web.push.apple.com",
}

// CheckService says whether endpoint is at one of services (an entry
// ".example.com" takes any host under example.com), on https's own port.
// A subscription is a URL a browser hands in, so without this anyone with
// a preferences link could make the service post to a host and port of
// their choosing on every issue; with it, only the push services are
// ever dialled. A service of one's own (a UnifiedPush or autopush server)
// is added to the list (NEWSLETTER_PUSH_SERVICES).
func CheckService(endpoint string, services []string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%w: endpoint is not an https URL", ErrBadSubscription)
	}
	if p := u.Port(); p != "" && p != "443" {
		return fmt.Errorf("%w: endpoint %s is not on port 443, where push services listen", ErrBadSubscription, u.Host)
	}
	host := strings.ToLower(u.Hostname())
	for _, s := range services {
		s = strings.ToLower(s)
		if host == s || (strings.HasPrefix(s, ".") && strings.HasSuffix(host, s)) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not a browser's push service", ErrBadSubscription, host)
}

// ServicesOnly is a Sender that posts only to endpoints at one of
// Services: a subscription stored before the list was checked at sign-up
// (or under another list) is answered ErrGone without a connection, so
// the push lane retires it (Classify) instead of dialling a host the
// browser did not get from its push service.
type ServicesOnly struct {
	Sender   Sender
	Services []string
}

// Send implements Sender.
func (s ServicesOnly) Send(ctx context.Context, sub Subscription, payload []byte, o Options) error {
	if err := CheckService(sub.Endpoint, s.Services); err != nil {
		return fmt.Errorf("%w: %w", ErrGone, err)
	}
	return s.Sender.Send(ctx, sub, payload, o)
}
