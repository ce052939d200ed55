package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

const eraseAdmin = "erase-admin-token-0123456789"

// After an event for a person and their erasure, Redis holds their
// address nowhere: not in a key's name, not in any value, the ingress task
// asynq keeps for a day after it ran included.
func TestEraseLeavesNoAddressAfterAnEvent(t *testing.T) {
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": eraseAdmin, "NEWSLETTER_DOUBLE_OPTIN": "false", "NEWSLETTER_WELCOME_DELAY": "1h",
		"NEWSLETTER_GROUP_GRACE": "1s", "NEWSLETTER_GROUP_MAX_DELAY": "2s",
	}), "serve")
	const email = "erase.me@example.com"
	svc.post(t, "/subscribe", `{"email":"`+email+`","topics":["digest","updates"]}`, "", http.StatusAccepted)
	svc.post(t, "/api/events", `{"email":"`+email+`","title":"Your export is ready","url":"https://example.com/e"}`, eraseAdmin, http.StatusAccepted)
	poll.True(t, poll.BusyMachine, "the event's mail", func() bool { return len(smtpSrv.To(email)) == 1 })
	// The ingress task is done and kept (asynq's retention): the case an
	// erasure used to miss.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.True(t, poll.BusyMachine, "the fan-out task completed and kept", func() bool {
		done, err := insp.ListCompletedTasks(tasks.QueueDefault)
		if err != nil {
			return false
		}
		for _, ti := range done {
			if ti.Type == tasks.TypeFanout {
				return true
			}
		}
		return false
	})

	req, _ := http.NewRequest("DELETE", svc.base+"/api/subscribers/"+email, nil)
	req.Header.Set("Authorization", "Bearer "+eraseAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("erase: %s", resp.Status)
	}
	// Once nothing is running any more (an events mail in flight would
	// still hold a task), read every key.
	poll.Until(t, poll.BusyMachine, func() error { return noAddressIn(context.Background(), rdb, email) })
}

// noAddressIn scans every key of the database and reads each value by its
// type, looking for addr in any case.
func noAddressIn(ctx context.Context, rdb *redis.Client, addr string) error {
	want := strings.ToLower(addr)
	var found []string
	iter := rdb.Scan(ctx, 0, "*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if strings.Contains(strings.ToLower(key), want) {
			found = append(found, "key name "+key)
			continue
		}
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			return err
		}
		var parts []string
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, key).Result()
			if err != nil && err != redis.Nil {
				return err
			}
			parts = []string{v}
		case "hash":
			m, err := rdb.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			for f, v := range m {
				parts = append(parts, f, v)
			}
		case "list":
			if parts, err = rdb.LRange(ctx, key, 0, -1).Result(); err != nil {
				return err
			}
		case "set":
			if parts, err = rdb.SMembers(ctx, key).Result(); err != nil {
				return err
			}
		case "zset":
			if parts, err = rdb.ZRange(ctx, key, 0, -1).Result(); err != nil {
				return err
			}
		case "stream":
			msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
			if err != nil {
				return err
			}
			for _, m := range msgs {
				for f, v := range m.Values {
					parts = append(parts, f, strings.ToLower(toString(v)))
				}
			}
		}
		for _, p := range parts {
			if strings.Contains(strings.ToLower(p), want) {
				found = append(found, typ+" "+key)
				break
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(found) > 0 {
		return &addressLeft{found}
	}
	return nil
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

type addressLeft struct{ where []string }

func (e *addressLeft) Error() string {
	return "the erased address is still in Redis: " + strings.Join(e.where, ", ")
}
