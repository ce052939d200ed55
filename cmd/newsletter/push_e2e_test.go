package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// TestE2EWebPushInBrowser opens the preference centre in headless
// Chromium with web push on: the page's own script runs under its CSP,
// shows "Also notify this browser", registers /sw.js and posts the
// browser's subscription; the subscription is stored with the subscriber,
// and a message sent to it is taken (and decrypted) by the push service.
// Headless Chromium has no push service of its own, so PushManager's
// subscribe is replaced by one that hands out a subscription of the test
// push service: everything else is the browser's.
func TestE2EWebPushInBrowser(t *testing.T) {
	// Own first: it may pause the test (t.Parallel), and the browser's
	// deadline runs from its making.
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	b := browser{t: t, ctx: newBrowser(t)}
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	pushSvc := webpushtest.New(t, pub)
	browserSub := pushSvc.NewSubscription()

	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_DOUBLE_OPTIN":          "false",
		"NEWSLETTER_WELCOME_DELAY":         "1h",
		"NEWSLETTER_VAPID_PUBLIC_KEY":      pub,
		"NEWSLETTER_VAPID_PRIVATE_KEY":     priv,
		"NEWSLETTER_VAPID_SUBJECT":         "mailto:ops@example.com",
		"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true", // the test push service is on loopback
	}), "serve")
	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"reader@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	st := versionedStore(t, rdb)
	sub, err := st.Get(context.Background(), "reader@example.com")
	if err != nil || sub.Status != store.Active {
		t.Fatalf("subscriber: %+v %v", sub, err)
	}
	tok := token.NewSigner([]byte("integration-test-secret"), 0).Sign(token.Preferences, sub.ID)

	b.do(chromedp.Navigate(svc.base + "/preferences?token=" + url.QueryEscape(tok)))
	b.heading("Your preferences")
	// The offer is shown by the script (hidden in the HTML): the script
	// ran under the page's CSP.
	b.do(chromedp.WaitVisible(chromedp.CSS("#push button")))

	subJSON, err := json.Marshal(browserSub)
	if err != nil {
		t.Fatal(err)
	}
	stub := fmt.Sprintf(`(() => {
  const json = %s;
  PushManager.prototype.getSubscription = async () => null;
  PushManager.prototype.subscribe = async function (opts) {
    window.askedKey = btoa(String.fromCharCode(...new Uint8Array(opts.applicationServerKey)))
      .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    window.askedVisible = opts.userVisibleOnly;
    return { options: opts, toJSON: () => json };
  };
  return true;
})()`, subJSON)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](stub)); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Click(chromedp.CSS("#push button")))
	poll.Until(t, poll.BusyMachine, func() error {
		status := b.text("#push [role=status]")
		if !strings.HasPrefix(status, "Done") {
			return fmt.Errorf("status %q", status)
		}
		return nil
	})
	asked, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.askedKey + ' ' + window.askedVisible`))
	if err != nil || asked != pub+" true" {
		t.Fatalf("subscribed with %q, want the VAPID public key and userVisibleOnly", asked)
	}
	// The service worker is the site's own, at the root scope.
	scope, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`navigator.serviceWorker.getRegistration().then(r => r ? r.scope : '')`,
		chromedp.EvalAwaitPromise))
	if err != nil || scope != svc.base+"/" {
		t.Fatalf("service worker scope %q (%v), want %s/", scope, err, svc.base)
	}

	stored, err := st.PushSubscriptions(context.Background(), sub.ID)
	if err != nil || len(stored) != 1 || stored[0].Endpoint != browserSub.Endpoint ||
		base64.RawURLEncoding.EncodeToString(stored[0].P256DH) != base64.RawURLEncoding.EncodeToString(browserSub.P256DH) {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	// What the lane will do with it: a message the push service decrypts.
	v, err := webpush.NewVAPID(pub, priv, "mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	g := netguard.Guard{AllowPrivate: true}
	c := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 10 * time.Second}))
	payload, _ := webpush.EventNotification("Your export is ready", "https://app.example.com/exports/1").Payload()
	s := stored[0]
	if err := c.Send(context.Background(), webpush.Subscription{Endpoint: s.Endpoint, P256DH: s.P256DH, Auth: s.Auth}, payload, webpush.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := pushSvc.Received(); len(got) != 1 || string(got[0].Plaintext) != string(payload) {
		t.Fatalf("the push service took %+v", got)
	}
}
