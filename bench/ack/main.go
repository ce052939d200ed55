// Command ack is `make bench-ack`: what replica-acknowledged writes cost a
// signup (NEWSLETTER_REDIS_ACK_REPLICAS, docs/operating.md, "What
// acknowledged means"). POST /subscribe is loaded with the wait off and
// on, in alternating pairs against one Redis primary with a replica of
// its own, so both sides of a pair share the machine's moment and neither
// always goes first.
package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-ack:", err)
		os.Exit(1)
	}
}

// modes are the two sides of a pair: the API's NEWSLETTER_REDIS_ACK_REPLICAS.
var modes = [2]string{"0", "1"}

// sample is one side of one pair.
type sample struct {
	ack      string
	res      bench.Result
	redisCPU time.Duration // the primary's, during the load
}

func run() error {
	ctx := context.Background()
	dur := bench.Duration(10 * time.Second)
	pairs, err := intEnv("PAIRS", 3)
	if err != nil {
		return err
	}
	workers, err := intEnv("CLIENTS", 64)
	if err != nil {
		return err
	}
	rs, err := startPrimaryAndReplica()
	if err != nil {
		return err
	}
	defer rs.stop()
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return err
	}
	defer cleanup()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	var samples []sample
	for pair := range pairs {
		order := modes
		if pair%2 == 1 {
			order = [2]string{modes[1], modes[0]}
		}
		for _, ack := range order {
			s, err := measure(ctx, bin, rs, hc, ack, workers, dur, pair)
			if err != nil {
				return err
			}
			samples = append(samples, s)
		}
	}
	report(samples, workers, dur)
	return nil
}

// measure starts the API with the wait set to ack, loads /subscribe for
// dur with a new address per request, and stops it.
func measure(ctx context.Context, bin string, rs *redisPair, hc *http.Client, ack string, workers int, dur time.Duration, pair int) (sample, error) {
	base, stop, err := startAPI(bin, rs.url(), ack)
	if err != nil {
		return sample{}, err
	}
	defer stop()
	before, err := bench.RedisCPU(ctx, rs.primary)
	if err != nil {
		return sample{}, err
	}
	prefix := fmt.Sprintf("a%s-p%d-%d", ack, pair, time.Now().UnixNano())
	res := bench.Load(workers, dur, func(n int64) error {
		body := fmt.Sprintf(`{"email":"%s-%d@example.com"}`, prefix, n)
		resp, err := hc.Post(base+"/subscribe", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		if err := resp.Body.Close(); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("answered %d", resp.StatusCode)
		}
		return nil
	})
	after, err := bench.RedisCPU(ctx, rs.primary)
	if err != nil {
		return sample{}, err
	}
	return sample{ack: ack, res: res, redisCPU: after - before}, nil
}

// startAPI starts `newsletter api` on a free port against url with the
// replicas' wait set to ack (and its default timeout), double opt-in on
// and no rate limit, and waits until it answers.
func startAPI(bin, url, ack string) (string, func(), error) {
	addr, err := bench.FreeAddr()
	if err != nil {
		return "", nil, err
	}
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(),
		"NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+url, "NEWSLETTER_SECRET=benchmark-secret-0123456789",
		"NEWSLETTER_SUBSCRIBE_RATE=0", "NEWSLETTER_DOUBLE_OPTIN=true", "NEWSLETTER_REDIS_ACK_REPLICAS="+ack)
	var stderr bytes.Buffer
	api.Stderr = &stderr
	if err := api.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { bench.Stop(api) }
	base := "http://" + addr
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		stop()
		return "", nil, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return base, stop, nil
}

// report prints every sample, then each side's median rate and p99 and
// the ratio of the medians.
func report(samples []sample, workers int, dur time.Duration) {
	fmt.Printf("POST /subscribe, new address per request, %d concurrent clients, %s per sample, Redis primary + 1 replica on loopback\n\n", workers, dur)
	fmt.Println("| pair | NEWSLETTER_REDIS_ACK_REPLICAS | signups/s | p50 | p99 | not 202 | Redis CPU per signup |")
	fmt.Println("| ---: | :---: | ---: | ---: | ---: | ---: | ---: |")
	for i, s := range samples {
		fmt.Printf("| %d | %s | %.0f | %s | %s | %d | %.1f µs |\n", i/2+1, s.ack, s.res.Rate(),
			s.res.P50.Round(100*time.Microsecond), s.res.P99.Round(100*time.Microsecond), s.res.Errors, perSignup(s))
	}
	fmt.Println()
	var rate [2]float64
	for i, ack := range modes {
		var rates []float64
		var p99s []time.Duration
		for _, s := range samples {
			if s.ack == ack {
				rates = append(rates, s.res.Rate())
				p99s = append(p99s, s.res.P99)
			}
		}
		rate[i] = median(rates)
		fmt.Printf("ack %s: median %.0f signups/s, median p99 %s\n", ack, rate[i], median(p99s).Round(100*time.Microsecond))
	}
	if rate[0] > 0 {
		fmt.Printf("with the wait: %.2f of the rate without it\n", rate[1]/rate[0])
	}
}

func perSignup(s sample) float64 {
	if s.res.Ops == 0 {
		return 0
	}
	return float64(s.redisCPU.Microseconds()) / float64(s.res.Ops)
}

func median[T float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func intEnv(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: a whole number of at least 1", name, v)
	}
	return n, nil
}
