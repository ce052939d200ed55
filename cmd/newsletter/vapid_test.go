package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
)

// `newsletter vapid generate` prints exactly the two lines of an env file,
// base64url keys of the right sizes, and the pair works: the configuration
// takes it and a push service checks the JWT signed with it.
func TestVAPIDGenerate(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"vapid", "generate"}, func(string) string { return "" }, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	re := regexp.MustCompile(`\ANEWSLETTER_VAPID_PUBLIC_KEY=([A-Za-z0-9_-]{87})\nNEWSLETTER_VAPID_PRIVATE_KEY=([A-Za-z0-9_-]{43})\n\z`)
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output %q: want exactly the two lines, base64url of 65 and 32 bytes", out.String())
	}
	vars := map[string]string{"NEWSLETTER_VAPID_SUBJECT": "mailto:ops@example.com"}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := webpushtest.New(t, m[1])
	g := netguard.Guard{AllowPrivate: true}
	c := webpush.NewClient(cfg.VAPID, g.Client(netguard.Limits{Timeout: 10 * time.Second}))
	if err := c.Send(context.Background(), srv.NewSubscription(), []byte(`{"title":"hi"}`), webpush.Options{}); err != nil {
		t.Fatal(err)
	}
	if len(srv.Received()) != 1 {
		t.Fatal("the push service did not take the message")
	}

	// Two runs, two pairs.
	var again bytes.Buffer
	run(context.Background(), []string{"vapid", "generate"}, func(string) string { return "" }, &again, &errOut)
	if again.String() == out.String() {
		t.Fatal("the same pair twice")
	}
	if code := run(context.Background(), []string{"vapid"}, func(string) string { return "" }, &again, &errOut); code == 0 {
		t.Fatal("`newsletter vapid` without generate succeeded")
	}
}
