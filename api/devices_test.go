package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// The product backend registers a person's app installs, lists them (the
// token's end only) and removes one; bad platforms and tokens, unknown and
// inactive people are refused with the reason and store nothing.
func TestDeviceRegistration(t *testing.T) {
	e := newHooksEnv(t, Config{})
	ctx := context.Background()
	sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "app@x.io", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "pending@x.io"}); err != nil {
		t.Fatal(err)
	}
	fcmToken := "cDeF_123:" + strings.Repeat("APA91b-x", 20)
	apnsToken := strings.Repeat("ab12", 16)
	for _, c := range []struct {
		path, body string
		status     int
		says       string
	}{
		{"/api/subscribers/app@x.io/devices", `{"platform":"sms","token":"` + fcmToken + `"}`, 400, "unknown platform"},
		{"/api/subscribers/app@x.io/devices", `{"token":"` + fcmToken + `"}`, 400, `platform\": \"fcm\" or`},
		{"/api/subscribers/app@x.io/devices", `{"platform":"fcm","token":"short"}`, 400, "not an FCM registration token: 5 characters, want 32 to 1024"},
		{"/api/subscribers/app@x.io/devices", `{"platform":"fcm","token":"` + strings.Repeat("é", 40) + `"}`, 400, "want A-Z a-z 0-9"},
		{"/api/subscribers/app@x.io/devices", `{"platform":"apns","token":"` + strings.Repeat("zz", 32) + `"}`, 400, "not an APNs device token: character 'z' at 0 is not hex"},
		{"/api/subscribers/app@x.io/devices", `{"platform":"apns","token":"` + apnsToken + `","extra":1}`, 400, "unknown field"},
		{"/api/subscribers/nobody@x.io/devices", `{"platform":"apns","token":"` + apnsToken + `"}`, 404, "no subscriber"},
		{"/api/subscribers/pending@x.io/devices", `{"platform":"apns","token":"` + apnsToken + `"}`, 409, "not an active"},
		{"/api/subscribers/not-an-address/devices", `{"platform":"apns","token":"` + apnsToken + `"}`, 400, ""},
	} {
		status, body := e.hookAdmin(t, "POST", c.path, c.body)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("POST %s %s: %d %s, want %d saying %q", c.path, c.body, status, body, c.status, c.says)
		}
	}
	if got, _ := e.store.DevicesOf(ctx, []int64{sub.ID}); len(got[0]) != 0 {
		t.Fatalf("refused devices were stored: %+v", got[0])
	}

	status, body := e.hookAdmin(t, "POST", "/api/subscribers/App@X.io/devices", `{"platform":"fcm","token":"`+fcmToken+`"}`)
	var added deviceView
	if status != 201 || json.Unmarshal([]byte(body), &added) != nil || added.ID != store.DeviceID("fcm", fcmToken) || added.TokenEnd != fcmToken[len(fcmToken)-6:] {
		t.Fatalf("add: %d %s", status, body)
	}
	if status, _ := e.hookAdmin(t, "POST", "/api/subscribers/app@x.io/devices", `{"platform":"apns","token":"`+apnsToken+`"}`); status != 201 {
		t.Fatalf("add apns: %d", status)
	}
	status, body = e.hookAdmin(t, "GET", "/api/subscribers/app@x.io/devices", "")
	var list struct{ Devices []deviceView }
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Devices) != 2 || strings.Contains(body, fcmToken) {
		t.Fatalf("list: %d %s", status, body)
	}
	if status, _ := e.hookAdmin(t, "DELETE", "/api/subscribers/app@x.io/devices/"+added.ID, ""); status != 204 {
		t.Fatalf("delete: %d", status)
	}
	if status, body := e.hookAdmin(t, "DELETE", "/api/subscribers/app@x.io/devices/"+added.ID, ""); status != 404 || !strings.Contains(body, "no device") {
		t.Fatalf("delete again: %d %s", status, body)
	}
	if got, _ := e.store.DevicesOf(ctx, []int64{sub.ID}); len(got[0]) != 1 || got[0][0].Platform != "apns" {
		t.Fatalf("stored after the delete: %+v", got[0])
	}
}

// A token registered for a second person moves to them: the first
// person's list no longer shows it, the second's does.
func TestDeviceTokenMovesToItsNewestOwner(t *testing.T) {
	e := newHooksEnv(t, Config{})
	ctx := context.Background()
	for _, email := range []string{"old@x.io", "new@x.io"} {
		if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
	apnsToken := strings.Repeat("cd34", 16)
	for _, who := range []string{"old@x.io", "new@x.io"} {
		if status, body := e.hookAdmin(t, "POST", "/api/subscribers/"+who+"/devices", `{"platform":"apns","token":"`+apnsToken+`"}`); status != 201 {
			t.Fatalf("register for %s: %d %s", who, status, body)
		}
	}
	count := func(who string) int {
		t.Helper()
		status, body := e.hookAdmin(t, "GET", "/api/subscribers/"+who+"/devices", "")
		var list struct{ Devices []deviceView }
		if status != 200 || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("list %s: %d %s", who, status, body)
		}
		return len(list.Devices)
	}
	if o, n := count("old@x.io"), count("new@x.io"); o != 0 || n != 1 {
		t.Fatalf("the old owner lists %d, the new %d; want 0 and 1", o, n)
	}
}
