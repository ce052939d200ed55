package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

const webhookAdminToken = "webhook-e2e-admin-0123456789"

// TestWebhookEndToEnd: an admin registers an endpoint; a person signs up
// and confirms through the real service (HTTP, Redis, SMTP); the endpoint
// gets subscriber.confirmed, signed so that the official Standard
// Webhooks library verifies it, with the person's id and address.
func TestWebhookEndToEnd(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)

	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": webhookAdminToken,
		"NEWSLETTER_FROM":        "News <news@example.com>",
		// The receiver is an httptest server on this machine.
		"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true",
	}), "serve")

	admin := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, svc.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+webhookAdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := admin("POST", "/api/webhooks", `{"url":"`+receiver.URL+`/crm?key=k","events":["subscriber.confirmed"]}`)
	var hook struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(body), &hook); code != http.StatusCreated || err != nil || hook.Secret == "" {
		t.Fatalf("register: %d %s", code, body)
	}

	resp, err := http.PostForm(svc.base+"/subscribe", url.Values{"email": {"hooked@example.com"}})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()
	tok := confirmToken(t, svc.base, smtpSrv.WaitFor(t, 1, poll.BusyMachine)[0])
	resp, err = http.PostForm(svc.base+"/confirm", url.Values{"token": {tok}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %v %v", resp, err)
	}
	resp.Body.Close()

	poll.True(t, poll.BusyMachine, "the endpoint to get subscriber.confirmed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	req, raw := got[0], bodies[0]
	mu.Unlock()
	wh, err := standardwebhooks.NewWebhook(hook.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(raw, req.Header); err != nil {
		t.Fatalf("the official library does not verify the delivery: %v", err)
	}
	var ev struct {
		Type      string
		Timestamp time.Time
		Data      struct {
			ID    int64
			Email string
		}
	}
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Type != "subscriber.confirmed" || ev.Data.Email != "hooked@example.com" || ev.Data.ID == 0 || ev.Timestamp.IsZero() {
		t.Fatalf("event %s (%v)", raw, err)
	}
	if req.URL.RawQuery != "key=k" || req.Method != http.MethodPost {
		t.Fatalf("%s %s: the registered URL, as given", req.Method, req.URL)
	}

	code, body = admin("GET", "/api/webhooks", "")
	if code != http.StatusOK || !strings.Contains(body, `"state":"active"`) || strings.Contains(body, hook.Secret) {
		t.Fatalf("list: %d %s", code, body)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		resp, err := http.Get(svc.base + "/metrics")
		if err != nil {
			return err
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`newsletter_notifications_total{lane="webhook",result="sent"} 1`,
			`newsletter_tasks_total{lane="webhook",queue="webhook",result="success",type="webhook:deliver"} 1`,
			`asynq_queue_size{queue="webhook"}`,
		} {
			if !strings.Contains(string(text), want) {
				return &missing{want}
			}
		}
		return nil
	})
}

type missing struct{ what string }

func (m *missing) Error() string { return "/metrics lacks " + m.what }
