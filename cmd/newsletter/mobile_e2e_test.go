package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

const mobileAdmin = "mobile-admin-token"

// TestE2EMobilePush: `newsletter serve` with FCM and APNs configured (their
// fakes: FCM's checks the service account's signed exchange, APNs's the
// ES256 provider token over HTTP/2 and TLS). The product backend registers
// a reader's phone and tablet and posts an event for them: each app
// install gets it once. A token FCM says is unregistered is deleted with
// its device on the next event, and the other install still gets that
// one.
func TestE2EMobilePush(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	fcmSvc, apnsSvc := fcmtest.New(t), apnstest.New(t)
	ca := filepath.Join(t.TempDir(), "apns-ca.pem")
	if err := os.WriteFile(ca, apnsSvc.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_DOUBLE_OPTIN":         "false",
		"NEWSLETTER_WELCOME_DELAY":        "1h",
		"NEWSLETTER_ADMIN_TOKEN":          mobileAdmin,
		"NEWSLETTER_FCM_CREDENTIALS_FILE": fcmSvc.CredentialsFile,
		"NEWSLETTER_FCM_URL":              fcmSvc.URL,
		"NEWSLETTER_APNS_KEY_FILE":        apnsSvc.KeyFile,
		"NEWSLETTER_APNS_KEY_ID":          apnstest.KeyID,
		"NEWSLETTER_APNS_TEAM_ID":         apnstest.TeamID,
		"NEWSLETTER_APNS_TOPIC":           apnstest.Topic,
		"NEWSLETTER_APNS_URL":             apnsSvc.URL,
		"NEWSLETTER_PUSH_CA_FILE":         ca,
	}), "serve")
	svc.post(t, "/subscribe", `{"email":"reader@example.com","topics":["digest","updates"]}`, "", http.StatusAccepted)
	phone, tablet := "fcm_"+strings.Repeat("Ab9-", 30), strings.Repeat("0a1b", 16)
	svc.post(t, "/api/subscribers/reader@example.com/devices", `{"platform":"fcm","token":"`+phone+`"}`, mobileAdmin, 201)
	svc.post(t, "/api/subscribers/reader@example.com/devices", `{"platform":"apns","token":"`+tablet+`"}`, mobileAdmin, 201)

	svc.post(t, "/api/events", `{"email":"reader@example.com","title":"Your export is ready","url":"https://app.example.com/exports/1"}`, mobileAdmin, 202)
	got := fcmSvc.WaitFor(t, 1)
	if got[0].Token != phone || got[0].Title != "Your export is ready" || got[0].URL != "https://app.example.com/exports/1" {
		t.Fatalf("FCM took %+v", got)
	}
	if got := apnsSvc.WaitFor(t, 1); got[0].Title != "Your export is ready" {
		t.Fatalf("APNs took %+v", got)
	}

	fcmSvc.Unregistered(phone)
	svc.post(t, "/api/events", `{"email":"reader@example.com","title":"Your invoice","url":"https://app.example.com/invoices/2"}`, mobileAdmin, 202)
	apnsSvc.WaitFor(t, 2)
	st := versionedStore(t, rdb)
	sub, err := st.Get(context.Background(), "reader@example.com")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		devs, err := st.DevicesOf(context.Background(), []int64{sub.ID})
		if err != nil {
			return err
		}
		if len(devs[0]) != 1 || devs[0][0].Platform != store.PlatformAPNs {
			return fmt.Errorf("devices %+v, want the tablet alone", devs[0])
		}
		return nil
	})
	if n := len(fcmSvc.Received()); n != 1 {
		t.Fatalf("FCM took %d messages, want the first event's alone", n)
	}
	if n := len(apnsSvc.Received()); n != 2 {
		t.Fatalf("APNs took %d messages, want 2 (each event once)", n)
	}
}
