package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// mailPath is the SMTP sink (channels/email/smtptest, the tests' own)
// behind a toxiproxy proxy, used as a library: the workers send through
// the proxy, which adds latency, timeouts and resets on cue, and the
// sink answers storms of 421/451 on cue. Only transient failures: a
// permanent one (5xx) would lose a mail by design, and every mail due
// must arrive.
type mailPath struct {
	sink  *smtptest.Server
	proxy *toxiproxy.Proxy

	mu    sync.Mutex
	storm bool
}

func startMailPath(tb *bench.TB) (*mailPath, error) {
	m := &mailPath{sink: smtptest.Start(tb)}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	m.proxy = toxiproxy.NewProxy(srv, "smtp", "127.0.0.1:0", m.sink.Addr)
	if err := m.proxy.Start(); err != nil {
		return nil, fmt.Errorf("toxiproxy: %w", err)
	}
	m.sink.SetScript(func(string, int) *smtptest.Fault {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.storm {
			return nil
		}
		return &smtptest.Fault{Err: &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "soak: try again later"}}
	})
	return m, nil
}

// URL is NEWSLETTER_SMTP_URL: the proxy, not the sink.
func (m *mailPath) URL() string { return "smtp://" + m.proxy.Listen + "?tls=none" }

// toxic adds one toxic (toxiproxy's JSON: latency, timeout, reset_peer)
// and returns how to take it off.
func (m *mailPath) toxic(kind, attrs string) (func(), error) {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":"downstream","toxicity":1,"attributes":%s}`, kind, kind, attrs)
	if _, err := m.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return nil, fmt.Errorf("toxic %s: %w", kind, err)
	}
	return func() {
		warn("remove toxic "+kind, m.proxy.Toxics.RemoveToxic(context.Background(), kind))
	}, nil
}

// setStorm turns the sink's 421 answers on or off.
func (m *mailPath) setStorm(on bool) {
	m.mu.Lock()
	m.storm = on
	m.mu.Unlock()
}

func (m *mailPath) close() { m.proxy.Stop() }
