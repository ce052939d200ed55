package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// TestFirstRunLinksLeadToTheListener (issue #46): `serve` without
// NEWSLETTER_BASE_URL on a port other than 8080 links to the address it
// listens on, and its banner's export line carries NEWSLETTER_BASE_URL,
// so that the invite `account create` prints in another terminal with
// those exports opens the console's invite page of this process.
func TestFirstRunLinksLeadToTheListener(t *testing.T) {
	addr := freeAddr(t)
	env := map[string]string{"NEWSLETTER_ADDR": addr}
	ctx, cancel := context.WithCancel(context.Background())
	svc := &service{base: "http://" + addr, stdout: &logtest.Buffer{}, stderr: &logtest.Buffer{}, done: make(chan int, 1), cancel: cancel}
	go func() {
		svc.done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, svc.stdout, svc.stderr)
	}()
	t.Cleanup(func() { svc.stop(t) })
	svc.waitListening(t)
	poll.True(t, poll.BusyMachine, "the whole banner", func() bool {
		return strings.Contains(svc.stdout.String(), "nothing survives a restart")
	})
	out := svc.stdout.String()
	if strings.Contains(out, "links in mails") {
		t.Errorf("without NEWSLETTER_BASE_URL the links lead elsewhere than the listener:\n%s", out)
	}
	m := regexp.MustCompile(`export (NEWSLETTER_REDIS_URL=\S+) (NEWSLETTER_SECRET=\S+) NEWSLETTER_BASE_URL=(\S+)`).FindStringSubmatch(out)
	if m == nil || m[3] != svc.base {
		t.Fatalf("the export line does not carry NEWSLETTER_BASE_URL=%s:\n%s", svc.base, out)
	}
	other := map[string]string{}
	for _, kv := range []string{m[1], m[2], "NEWSLETTER_BASE_URL=" + m[3]} {
		k, v, _ := strings.Cut(kv, "=")
		other[k] = v
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"account", "create", "--email", "first@example.org", "--role", "admin"},
		func(k string) string { return other[k] }, &stdout, &stderr); code != 0 {
		t.Fatalf("account create: exit %d\n%s", code, stderr.String())
	}
	link := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(link, svc.base+"/") {
		t.Fatalf("the invite link %q does not lead to %s", link, svc.base)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the invite link answers %d", resp.StatusCode)
	}
}
