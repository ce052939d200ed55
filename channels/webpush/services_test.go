package webpush

import (
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/channels"
)

// Only the push services' hosts, on https's port, are taken; an entry
// with a leading dot takes the hosts under it and not its own name's
// look-alikes.
func TestCheckService(t *testing.T) {
	for endpoint, ok := range map[string]bool{
		"https://fcm.googleapis.com/fcm/send/abc":                   true,
		"https://FCM.googleapis.com:443/fcm/send/abc":               true,
		"https://updates.push.services.mozilla.com/wpush/v2/x":      true,
		"https://wns2-by3p.notify.windows.com/w/?token=x":           true,
		"https://web.push.apple.com/QGx":                            true,
		"https://notify.windows.com.evil.example/w":                 false,
		"https://evilnotify.windows.com/w":                          false,
		"https://fcm.googleapis.com.evil.example/fcm/send/abc":      false,
		"https://fcm.googleapis.com:8443/fcm/send/abc":              false,
		"http://fcm.googleapis.com/fcm/send/abc":                    false,
		"https://8.8.8.8:8443/x":                                    false,
		"https://93.184.215.14/anything":                            false,
		"https://user@fcm.googleapis.com@evil.example/fcm/send/abc": false,
	} {
		err := CheckService(endpoint, DefaultServices)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrBadSubscription)) {
			t.Errorf("%s: %v, want taken %v", endpoint, err, ok)
		}
	}
	if err := CheckService("https://push.example.org/up/x", append([]string{"push.example.org"}, DefaultServices...)); err != nil {
		t.Errorf("a service added to the list: %v", err)
	}
}

type recordingSender struct{ endpoints []string }

func (r *recordingSender) Send(_ context.Context, s Subscription, _ []byte, _ Options) error {
	r.endpoints = append(r.endpoints, s.Endpoint)
	return nil
}

// ServicesOnly posts to a push service and retires, without a
// connection, a subscription stored at any other host.
func TestServicesOnly(t *testing.T) {
	rec := &recordingSender{}
	s := ServicesOnly{Sender: rec, Services: DefaultServices}
	if err := s.Send(context.Background(), Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/a"}, nil, Options{}); err != nil {
		t.Fatalf("a push service: %v", err)
	}
	err := s.Send(context.Background(), Subscription{Endpoint: "https://93.184.215.14/anything"}, nil, Options{})
	if !errors.Is(err, ErrGone) || Classify(err).Verdict != channels.Retire {
		t.Fatalf("a stored endpoint at no push service: %v (%v), want ErrGone, retired", err, Classify(err).Verdict)
	}
	if len(rec.endpoints) != 1 || rec.endpoints[0] != "https://fcm.googleapis.com/fcm/send/a" {
		t.Fatalf("posted to %q, want the push service alone", rec.endpoints)
	}
}
