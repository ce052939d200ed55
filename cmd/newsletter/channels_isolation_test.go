package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestChannelIsolation is the design's sentence as a test: "each channel
// has its own queue and its own worker pool; a slow SMS gateway backs up
// only the SMS queue". The SMS gateway hangs, APNs answers 503 and FCM is
// slow; an event goes to 2,000 readers who each have e-mail, a browser, an
// app (half on Android, half on iOS) and a number they turned texts on
// for.
//
//   - Every e-mail and every web push arrives, once each, while not one
//     text has gone out.
//   - The sms lane backs up: its depth and the age of its oldest task rise
//     on /metrics, and its alert fires in promtool.
//   - The providers recover, and a second process serving the sms lane
//     (`newsletter worker --lanes sms`) is killed with SIGKILL on the way:
//     every text and every app push arrives, the texts at most the killed
//     worker's concurrency twice, the app pushes once.
func TestChannelIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 readers on four channels, and waits for asynq to recover a killed worker's tasks")
	}
	const readers, smsConcurrency = 2000, 4
	rdb, redisURL := bulkTestRedis(t)
	smtpSrv := smtptest.Start(t)
	st := versionedStore(t, rdb)
	ctx := context.Background()

	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	web := webpushtest.New(t, pub)
	fcmSvc, apnsSvc, gw := fcmtest.New(t), apnstest.New(t), smstest.New(t)
	ca := filepath.Join(t.TempDir(), "apns-ca.pem")
	if err := os.WriteFile(ca, apnsSvc.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.Hang()
	apnsSvc.Unavailable(1<<30, "1")
	fcmSvc.Slow(200 * time.Millisecond)

	emails := seedDigest(t, st, "ch", readers)
	endpoints, numbers, fcmTokens, apnsTokens := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, e := range emails {
		sub, err := st.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		b := web.NewSubscription()
		if err := st.AddPushSubscription(ctx, sub.ID, store.PushSubscription{Endpoint: b.Endpoint, P256DH: b.P256DH, Auth: b.Auth}); err != nil {
			t.Fatal(err)
		}
		endpoints[b.Endpoint] = true
		dev := store.Device{Platform: store.PlatformFCM, Token: fmt.Sprintf("fcm_%040d", i)}
		if i%2 == 1 {
			dev = store.Device{Platform: store.PlatformAPNs, Token: fmt.Sprintf("%064x", i)}
			apnsTokens[dev.Token] = true
		} else {
			fcmTokens[dev.Token] = true
		}
		if _, err := st.AddDevice(ctx, sub.ID, dev); err != nil {
			t.Fatal(err)
		}
		number := "+447400" + strconv.Itoa(100000+i)
		if _, err := st.SetPhone(ctx, sub.ID, number, "test"); err != nil {
			t.Fatal(err)
		}
		numbers[number] = true
		if err := st.SetChannels(ctx, sub.ID, topics.Updates, store.AllChannels); err != nil {
			t.Fatal(err)
		}
	}

	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN":           isolationAdmin,
		"NEWSLETTER_VAPID_PUBLIC_KEY":      pub,
		"NEWSLETTER_VAPID_PRIVATE_KEY":     priv,
		"NEWSLETTER_VAPID_SUBJECT":         "mailto:ops@example.com",
		"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true",
		"NEWSLETTER_FCM_CREDENTIALS_FILE":  fcmSvc.CredentialsFile,
		"NEWSLETTER_FCM_URL":               fcmSvc.URL,
		"NEWSLETTER_APNS_KEY_FILE":         apnsSvc.KeyFile,
		"NEWSLETTER_APNS_KEY_ID":           apnstest.KeyID,
		"NEWSLETTER_APNS_TEAM_ID":          apnstest.TeamID,
		"NEWSLETTER_APNS_TOPIC":            apnstest.Topic,
		"NEWSLETTER_APNS_URL":              apnsSvc.URL,
		"NEWSLETTER_PUSH_CA_FILE":          ca,
		"NEWSLETTER_SMS_URL":               gw.URL,
		"NEWSLETTER_SMS_ACCOUNT_SID":       gw.AccountSID,
		"NEWSLETTER_SMS_AUTH_TOKEN":        gw.AuthToken,
		"NEWSLETTER_SMS_FROM":              "+15005550006",
		"NEWSLETTER_LANES":                 "email,push,webhook,sms",
		"NEWSLETTER_CONCURRENCY":           "8",
		"NEWSLETTER_PUSH_CONCURRENCY":      "8",
		"NEWSLETTER_SMS_CONCURRENCY":       strconv.Itoa(smsConcurrency),
		"NEWSLETTER_SEND_RATE":             "100000",
		"NEWSLETTER_PUSH_RATE":             "100000",
		"NEWSLETTER_SMS_RATE":              "300", // the recovered lane takes seconds: time to kill a worker in it
		"NEWSLETTER_RETRY_BASE":            "100ms",
		"NEWSLETTER_CLAIM_TTL":             "30m",
	})
	// The readers are in: the bulk send's turn (its set-up ran beside
	// the other bulk sends).
	bulkDone := oneBulkSendAtATime(t)
	svc := startService(t, env, "serve")
	began := time.Now()
	code, body := adminCall(t, svc.base, "POST", "/api/events", `{"topic":"updates","title":"We launched","url":"https://example.com/launch"}`)
	if code != 202 {
		t.Fatalf("event: %d %s", code, body)
	}

	// Every e-mail and every web push, while not one text goes out.
	poll.True(t, poll.BusyMachine, "every reader's mail", func() bool { return everyoneGotMail(smtpSrv, emails) })
	poll.Until(t, poll.BusyMachine, func() error {
		got := map[string]bool{}
		for _, m := range web.Received() {
			got[m.Endpoint] = true
		}
		if len(got) < len(endpoints) {
			return fmt.Errorf("%d of %d browsers notified", len(got), len(endpoints))
		}
		return nil
	})
	exactlyOncePerAddress(t, smtpSrv, emails)
	if n := len(web.Received()); n != len(endpoints) {
		t.Fatalf("%d web pushes for %d browsers", n, len(endpoints))
	}
	if n := len(gw.Messages()); n != 0 {
		t.Fatalf("%d texts went out through a gateway that never answers", n)
	}

	t.Logf("mail and web push done in %s", time.Since(began).Round(time.Second))
	// The bulk send is over: the rest is a stuck lane ageing, 2,000
	// texts at 300/s and asynq's recoverer, beside the next bulk send.
	bulkDone()
	// The sms lane backs up, and its alert fires.
	var first, later laneFigures
	poll.Until(t, poll.BusyMachine, func() error {
		first = scrapeLanes(t, svc.base)
		if first.pending["sms"] < readers/2 || first.age["sms"] <= 0 {
			return fmt.Errorf("sms lane: %d pending, oldest %.0fs", first.pending["sms"], first.age["sms"])
		}
		return nil
	})
	poll.Until(t, poll.BusyMachine, func() error {
		later = scrapeLanes(t, svc.base)
		if later.age["sms"] <= first.age["sms"] || later.age["sms"] < 5 {
			return fmt.Errorf("sms lane's oldest pending: %.0fs, then %.0fs", first.age["sms"], later.age["sms"])
		}
		return nil
	})
	if later.pending["email"] != 0 {
		t.Fatalf("e-mail lane: %d pending after every mail went out", later.pending["email"])
	}
	alertFires(t, first, later, tasks.LaneSMS, tasks.LaneEmail, tasks.LaneWebhook)

	t.Logf("sms lane backed up at %s", time.Since(began).Round(time.Second))
	// The providers recover; a second sms worker joins and is killed.
	apnsSvc.Unavailable(0, "")
	fcmSvc.Slow(0)
	gw.Release()
	wenv := map[string]string{}
	for k, v := range env {
		wenv[k] = v
	}
	wenv["NEWSLETTER_ADDR"] = freeAddr(t)
	killed := startProcess(t, "worker --lanes sms", wenv)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.True(t, poll.BusyMachine, "the sms worker process to work on the lane", func() bool {
		servers, err := insp.Servers()
		if err != nil {
			return false
		}
		for _, s := range servers {
			if s.PID == killed.Process.Pid && len(s.ActiveWorkers) > 0 {
				return true
			}
		}
		return false
	})
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	t.Logf("sms worker killed at %s", time.Since(began).Round(time.Second))
	// Another sms worker joins once the killed one's leases are expired:
	// its start runs asynq's recoverer, which takes those tasks back now,
	// not at the live servers' next minute (TestLaneIsolation).
	expireDeadLeases(t, rdb, tasks.QueueSMS, killed)
	wenv["NEWSLETTER_ADDR"] = freeAddr(t)
	startProcess(t, "worker --lanes sms", wenv)

	poll.Until(t, poll.BusyMachine+recoverAfter, func() error {
		texted := map[string]bool{}
		for _, m := range gw.Messages() {
			texted[m.To] = true
		}
		apps := map[string]bool{}
		for _, m := range fcmSvc.Received() {
			apps[m.Token] = true
		}
		for _, m := range apnsSvc.Received() {
			apps[m.DeviceToken] = true
		}
		if len(texted) < len(numbers) || len(apps) < len(fcmTokens)+len(apnsTokens) {
			return fmt.Errorf("%d of %d numbers texted, %d of %d apps notified", len(texted), len(numbers), len(apps), len(fcmTokens)+len(apnsTokens))
		}
		return nil
	})
	t.Logf("every text and app push at %s", time.Since(began).Round(time.Second))
	for _, m := range gw.Messages() {
		if !numbers[m.To] || m.Body != "We launched https://example.com/launch" {
			t.Fatalf("a text %+v", m)
		}
	}
	dups := len(gw.Messages()) - len(numbers)
	t.Logf("%d texts for %d numbers after the sms worker was killed: %d duplicates", len(gw.Messages()), len(numbers), dups)
	if dups > smsConcurrency {
		t.Fatalf("%d duplicate texts, more than the killed worker's concurrency %d", dups, smsConcurrency)
	}
	if n, m := len(fcmSvc.Received()), len(apnsSvc.Received()); n != len(fcmTokens) || m != len(apnsTokens) {
		t.Fatalf("%d FCM and %d APNs messages for %d and %d apps: an app notified twice", n, m, len(fcmTokens), len(apnsTokens))
	}
	for _, m := range fcmSvc.Received() {
		if !fcmTokens[m.Token] || !strings.Contains(m.Title, "We launched") {
			t.Fatalf("FCM message %+v", m)
		}
	}
	if n := len(web.Received()); n != len(endpoints) {
		t.Fatalf("%d web pushes for %d browsers after the recovery: a browser notified twice", n, len(endpoints))
	}
	exactlyOncePerAddress(t, smtpSrv, emails)
}
