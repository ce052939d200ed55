// Command soak is the chaos soak of make soak (docs/operating.md, The
// soak): the service's roles as processes on loopback, two of each,
// on a Redis with a replica under Sentinel, mail through a fault proxy
// into a sink; a bounded load of signups, confirmations, preference
// changes, unsubscribes, events and issues; faults at random moments,
// overlapping; then an invariant check, a Markdown report and a plot in
// soak-report/<time>/.
package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/bench"
)

// settings are the soak's knobs, from the environment.
type settings struct {
	duration     time.Duration // SOAK
	redisPort    int           // SOAK_REDIS_PORT, and the next one for the replica
	sentinelPort int           // SOAK_SENTINEL_PORT, and the next two
	rate         float64       // SOAK_RATE: operations a second
	// cluster (SOAK_CLUSTER=1): a Redis Cluster of six nodes on
	// redisPort to redisPort+5, their bus ports from sentinelPort.
	cluster      bool
	welcomeDelay time.Duration
	concurrency  int
}

func readSettings() (settings, error) {
	s := settings{duration: 30 * time.Minute, redisPort: 7900, sentinelPort: 27900, rate: 4, welcomeDelay: 5 * time.Second, concurrency: 4}
	var err error
	if v := os.Getenv("SOAK"); v != "" {
		if s.duration, err = time.ParseDuration(v); err != nil || s.duration < time.Minute {
			return s, fmt.Errorf("SOAK=%q: a Go duration of at least 1m (30m, 5m)", v)
		}
	}
	for name, dst := range map[string]*int{"SOAK_REDIS_PORT": &s.redisPort, "SOAK_SENTINEL_PORT": &s.sentinelPort} {
		if v := os.Getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 1024 || *dst > 65000 {
				return s, fmt.Errorf("%s=%q: a port from 1024 to 65000", name, v)
			}
		}
	}
	switch v := os.Getenv("SOAK_CLUSTER"); v {
	case "", "0":
	case "1":
		s.cluster = true
	default:
		return s, fmt.Errorf("SOAK_CLUSTER=%q: 1 (a Redis Cluster) or 0 (Sentinel)", v)
	}
	if v := os.Getenv("SOAK_RATE"); v != "" {
		if s.rate, err = strconv.ParseFloat(v, 64); err != nil || s.rate <= 0 || s.rate > 100 {
			return s, fmt.Errorf("SOAK_RATE=%q: operations a second, above 0 and at most 100", v)
		}
	}
	return s, nil
}

func main() {
	s, err := readSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ok, err := soak(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func warn(what string, err error) { bench.Warn(what, err) }

// environment is what every role gets (each adds NEWSLETTER_ADDR).
func environment(redisEnv []string, smtpURL, base string, s settings) []string {
	return append(redisEnv,
		"NEWSLETTER_SMTP_URL="+smtpURL,
		"NEWSLETTER_SECRET=soak-secret-0123456789abcdef",
		"NEWSLETTER_ADMIN_TOKEN="+adminToken,
		"NEWSLETTER_BASE_URL="+base,
		"NEWSLETTER_FROM=Soak <soak@example.com>",
		"NEWSLETTER_WELCOME_DELAY="+s.welcomeDelay.String(),
		"NEWSLETTER_SUBSCRIBE_RATE=0", // every signup comes from 127.0.0.1
		"NEWSLETTER_CONFIRM_RATE=0",
		"NEWSLETTER_REQUIRE_POSTAL_ADDRESS=false",
		"NEWSLETTER_CONCURRENCY="+strconv.Itoa(s.concurrency),
		"NEWSLETTER_SHUTDOWN_TIMEOUT=10s",
		"NEWSLETTER_LOG_LEVEL=warn",
	)
}

const adminToken = "soak-admin-token-0123456789"

// startRoles starts two of each role and waits for the APIs to answer.
func startRoles(bin, dir string, env func(base string) []string) ([]*role, error) {
	var roles []*role
	for _, kind := range []string{"api", "worker", "scheduler"} {
		for i := 1; i <= 2; i++ {
			addr, err := bench.FreeAddr()
			if err != nil {
				return nil, err
			}
			roles = append(roles, &role{name: fmt.Sprintf("%s-%d", kind, i), args: []string{kind}, addr: addr, bin: bin, dir: dir})
		}
	}
	base := "http://" + roles[0].addr
	for _, r := range roles {
		r.env = env(base)
		if err := r.start(); err != nil {
			return roles, err
		}
	}
	for _, r := range roles[:2] {
		if err := bench.WaitHTTP("http://" + r.addr + "/readyz"); err != nil {
			return roles, err
		}
	}
	return roles, nil
}

func newClient() *http.Client {
	return &http.Client{
		Timeout:       15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func runDir() (string, error) {
	dir := filepath.Join("soak-report", time.Now().UTC().Format("20060102-150405"))
	return dir, os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
}
