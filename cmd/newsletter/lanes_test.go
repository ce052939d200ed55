package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// TestUnknownLaneStopsStartUp: a lane that does not exist, in the flag or
// the variable, stops start-up with an error naming where it came from.
func TestUnknownLaneStopsStartUp(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"worker", "--lanes", "email,fax"}, nil, `--lanes: unknown lane "fax": want a comma-separated list of email, push, webhook, sms`},
		{[]string{"worker", "--lanes="}, nil, "--lanes: want a comma-separated list"},
		{[]string{"worker"}, map[string]string{"NEWSLETTER_LANES": "fax"}, `NEWSLETTER_LANES: unknown lane "fax"`},
		{[]string{"serve"}, map[string]string{"NEWSLETTER_LANES": "email,email"}, `NEWSLETTER_LANES: lane "email" named twice`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, func(k string) string { return c.env[k] }, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v %v: exit %d, stderr:\n%s\nwant exit 1 saying %s", c.args, c.env, code, errb.String(), c.want)
		}
	}
}

// TestWorkerServesItsLanesOnly: `worker --lanes push` needs no mail
// transport (none is configured) and never takes e-mail; its push lane,
// with no push sender in this build, is not started either, so every task
// waits for the worker that serves it.
func TestWorkerServesItsLanesOnly(t *testing.T) {
	rdb, url := redistest.Own(t, redistest.DBCommand)
	env := realEnv(url, "", nil)
	delete(env, "NEWSLETTER_SMTP_URL")
	svc := startService(t, env, "worker", "--lanes", "push")
	poll.True(t, poll.BusyMachine, "the worker's start-up line", func() bool {
		return strings.Contains(svc.stderr.String(), `msg="worker started" lanes=""`)
	})
	if s := svc.stderr.String(); !strings.Contains(s, "lane not served") || !strings.Contains(s, "lane=push") {
		t.Fatalf("no line saying the push lane is not served:\n%s", s)
	}
	client := asynq.NewClientFromRedisClient(rdb)
	info, err := client.Enqueue(asynq.NewTask(tasks.TypeConfirmEmail, []byte(`{}`)), asynq.Queue(tasks.QueueTransactional))
	if err != nil {
		t.Fatal(err)
	}
	// No asynq server of this process serves an e-mail queue (servers
	// register their queues as they start, before the line above).
	insp := asynq.NewInspectorFromRedisClient(rdb)
	servers, err := insp.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range servers {
		for q := range srv.Queues {
			if tasks.LaneOf(q) != tasks.LanePush {
				t.Errorf("a push-only worker serves queue %s", q)
			}
		}
	}
	if ti, err := insp.GetTaskInfo(tasks.QueueTransactional, info.ID); err != nil || ti.State != asynq.TaskStatePending {
		t.Fatalf("e-mail task under a push-only worker: %v %v, want pending", ti, err)
	}
}
