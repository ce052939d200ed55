package worker

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestAppAnswersAsTheirChannelsSay: the platforms' own answers, through
// their real clients, settle each device as its channel's Classify says:
// FCM's UNREGISTERED and APNs' 410 delete the device; FCM's
// SENDER_ID_MISMATCH and APNs' BadDeviceToken (which a wrong setting
// answers for every device) drop the notification and keep the device.
func TestAppAnswersAsTheirChannelsSay(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	email := seed(t, d.store, "m", 1)[0]
	sub, err := d.store.Get(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	fcmSvc, apnsSvc := fcmtest.New(t), apnstest.New(t)
	fcmSvc.ExpectRejections()
	apnsSvc.ExpectRejections()
	creds, err := fcm.LoadCredentials(fcmSvc.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := apns.LoadKey(apnsSvc.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	fcmGone, fcmMismatch := strings.Repeat("g", 40), strings.Repeat("m", 40)
	apnsGone, apnsBad := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	fcmSvc.Unregistered(fcmGone)
	fcmSvc.Answer(fcmMismatch, http.StatusForbidden, "SENDER_ID_MISMATCH", "The sender is not the token's.")
	apnsSvc.Unregistered(apnsGone)
	apnsSvc.Answer(apnsBad, http.StatusBadRequest, "BadDeviceToken")
	for _, dev := range []store.Device{{Platform: store.PlatformFCM, Token: fcmGone}, {Platform: store.PlatformFCM, Token: fcmMismatch},
		{Platform: store.PlatformAPNs, Token: apnsGone}, {Platform: store.PlatformAPNs, Token: apnsBad}} {
		if _, err := d.store.AddDevice(ctx, sub.ID, dev); err != nil {
			t.Fatal(err)
		}
	}
	apps := map[string]*AppGate{
		store.PlatformFCM: NewAppGate(&fcm.Client{Creds: creds, BaseURL: fcmSvc.URL, HTTP: &http.Client{Timeout: time.Minute}}, 0, 0),
		store.PlatformAPNs: NewAppGate(&apns.Client{Key: key, KeyID: apnstest.KeyID, TeamID: apnstest.TeamID, Topic: apnstest.Topic,
			BaseURL: apnsSvc.URL, HTTP: apns.NewHTTPClient(apnsSvc.RootCAs())}, 0, 0),
	}
	h := NewHandlers(Deps{Store: d.store, Apps: apps, PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second},
		Metrics: d.metrics, Log: discard}).Push
	task := tasks.NewPush(tasks.PushPayload{Key: "ev:answers", SubscriberID: sub.ID, Topics: []string{topics.Updates}, Title: "Hello"})
	if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil {
		t.Fatalf("every answer is final: %v, want no retry", err)
	}
	left, err := d.store.DevicesOf(ctx, []int64{sub.ID})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, dev := range left[0] {
		kept = append(kept, dev.Token)
	}
	if len(kept) != 2 || !strings.Contains(strings.Join(kept, ","), fcmMismatch) || !strings.Contains(strings.Join(kept, ","), apnsBad) {
		t.Fatalf("devices kept %v, want the mismatched FCM one and the APNs BadDeviceToken one", kept)
	}
	for _, p := range []string{store.PlatformFCM, store.PlatformAPNs} {
		dropped := testutil.ToFloat64(d.metrics.AppNotifications.WithLabelValues(p, "dropped"))
		dead := testutil.ToFloat64(d.metrics.AppNotifications.WithLabelValues(p, "dead"))
		if dropped != 1 || dead != 1 {
			t.Fatalf("%s: dropped %v, dead %v, want 1 and 1", p, dropped, dead)
		}
	}
}
