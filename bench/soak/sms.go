package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels/sms/smstest"
)

// smsPath is the SMS gateway's fake (channels/sms/smstest, the tests'
// own Twilio-shaped Messages API) behind a toxiproxy proxy: the sms lane
// texts through the proxy, which adds latency, hangs and resets on cue,
// and the fake answers storms of 429 or 503 on cue. Only transient
// failures, as on the mail path: every text due must arrive.
type smsPath struct {
	gw    *smstest.Server
	proxy *toxiproxy.Proxy
}

func startSMSPath(tb *bench.TB) (*smsPath, error) {
	s := &smsPath{gw: smstest.New(tb)}
	u, err := url.Parse(s.gw.URL)
	if err != nil {
		return nil, err
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	s.proxy = toxiproxy.NewProxy(srv, "sms", "127.0.0.1:0", u.Host)
	if err := s.proxy.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy: %w", err)
	}
	return s, nil
}

// environment is the sms lane's settings: the proxy as the gateway, GB
// mobiles (the numbers the load gives), caps far above the load (a cap
// holds a text until midnight: not a fault the soak injects), and the
// mail lane's concurrency, so a killed worker's duplicates keep one
// bound.
func (s *smsPath) environment(concurrency int) []string {
	return []string{
		"NEWSLETTER_SMS_URL=http://" + s.proxy.Listen,
		"NEWSLETTER_SMS_ACCOUNT_SID=" + s.gw.AccountSID,
		"NEWSLETTER_SMS_AUTH_TOKEN=" + s.gw.AuthToken,
		"NEWSLETTER_SMS_FROM=+15005550006",
		"NEWSLETTER_SMS_COUNTRIES=GB",
		"NEWSLETTER_SMS_PER_NUMBER_DAY=100000",
		"NEWSLETTER_SMS_PER_DAY=1000000",
		"NEWSLETTER_SMS_RATE=100",
		fmt.Sprintf("NEWSLETTER_SMS_CONCURRENCY=%d", concurrency),
	}
}

// toxic adds one toxic to the gateway's path (as mailPath.toxic).
func (s *smsPath) toxic(kind, attrs string) (func(), error) {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":"downstream","toxicity":1,"attributes":%s}`, kind, kind, attrs)
	if _, err := s.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return nil, fmt.Errorf("toxic %s: %w", kind, err)
	}
	return func() {
		warn("remove toxic "+kind, s.proxy.Toxics.RemoveToxic(context.Background(), kind))
	}, nil
}

// storm makes the fake answer every request status (429, 503) with
// Retry-After: 1 until it is called again with 0.
func (s *smsPath) storm(status int) {
	if status == 0 {
		s.gw.FailNext(0, 0, "")
		return
	}
	s.gw.FailNext(1<<30, status, "1")
}

// texts are the texts the fake took, as mails of kind sms:<body> to the
// person whose number they went to (phones: number → address).
func (s *smsPath) texts(phones map[string]string) []mail {
	var out []mail
	for _, m := range s.gw.Messages() {
		to, ok := phones[m.To]
		if !ok {
			to = "unknown number " + m.To
		}
		out = append(out, mail{to: to, kind: "sms:" + m.Body, at: m.At})
	}
	return out
}

func (s *smsPath) close() { s.proxy.Stop() }
