// Command redirect is `make bench-redirect`: requests/s and p99 of the
// counted redirect (GET /r/{token}) served by the API role alone in its
// own process, with its counting included: every click goes into the
// process's buffer and is written to Redis in batches while the load
// runs. The clicks come from many readers over several links, so the
// unique counts' HyperLogLogs grow as they would; at the end it checks
// that Redis holds every click the load made.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/store"
)

const (
	secret  = "benchmark-secret-0123456789"
	issue   = int64(1)
	readers = 20000
	links   = 8
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-redirect:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	dur := bench.Duration(10 * time.Second)
	workers := 64
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	st := store.NewRedis(rdb)
	targets := make([]string, links)
	for i := range targets {
		targets[i] = fmt.Sprintf("https://example.com/article/%d?utm_source=newsletter", i)
	}
	if err := st.SetIssueLinks(ctx, issue, targets); err != nil {
		return err
	}
	// Every reader's mail as the worker makes it: one reader part, one
	// link part per link; sent an hour ago, so no click is taken for a
	// scanner's early one.
	keys := engage.NewKeys([]byte(secret))
	sent := time.Now().Add(-time.Hour)
	linkParts := make([]string, links)
	for i := range linkParts {
		linkParts[i] = keys.LinkPart(engage.Link, issue, i)
	}
	paths := make([]string, readers*links)
	for r := range readers {
		rp := keys.ReaderPart(issue, int64(r+1), sent)
		for i := range links {
			paths[r*links+i] = "/r/" + engage.Token(linkParts[i], rp)
		}
	}
	base, stop, err := startAPI(url)
	if err != nil {
		return err
	}
	defer stop()
	hc := &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// A browser's agent: Go's own is a library's, counted as a
	// scanner's.
	const agent = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"
	click := func(n int64) error {
		req, err := http.NewRequest(http.MethodGet, base+paths[n%int64(len(paths))], nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", agent)
		return expect(hc.Do(req))
	}
	// Warm up: the API reads the issue's links once, then from memory.
	for n := range int64(workers) {
		if err := click(n); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	res := bench.Load(workers, dur, click)
	made := res.Ops + int64(workers)
	// The ceiling of this machine, HTTP and load generator, as it is
	// now: /healthz does no I/O.
	health := bench.Load(workers, dur/2, func(int64) error {
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // a short read shows as the close's error
		return resp.Body.Close()
	})
	// The buffer is written every second: wait for the last batch.
	var e store.Engagement
	deadline := time.Now().Add(30 * time.Second)
	for {
		if e, err = st.IssueEngagement(ctx, issue); err != nil {
			return err
		}
		if e.Clicks+e.MachineClicks >= made || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("redis %s, %d concurrent clients, %s, Go load generator in this process (2 cores shared with the server)\n", url, workers, dur)
	fmt.Printf("GET /r/{token}   %s\n", res)
	fmt.Printf("GET /healthz     %s  <- HTTP and load-generator ceiling on this machine now (no I/O)\n", health)
	fmt.Printf("counted in Redis: %d clicks (%d machine) of %d made (%d distinct readers by HyperLogLog, of %d tokens' %d readers)\n",
		e.Clicks, e.MachineClicks, made, e.UniqueClickers, len(paths), min(readers, int(made)))
	fmt.Printf("target 20000/s and p99 < 10ms: %.0f/s (%v), p99 %s (%v)\n", res.Rate(), res.Rate() >= 20000,
		res.P99.Round(time.Millisecond/10), res.P99 < 10*time.Millisecond)
	if e.Clicks != made {
		return fmt.Errorf("redis holds %d clicks, the load made %d", e.Clicks, made)
	}
	return nil
}

// startAPI builds the binary and starts `newsletter api` on a free port
// against url, waiting until it answers. stop ends the process (its
// shutdown writes what the buffer still holds), then removes the binary.
func startAPI(url string) (base string, stop func(), err error) {
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return "", nil, err
	}
	addr, err := bench.FreeAddr()
	if err != nil {
		cleanup()
		return "", nil, err
	}
	base = "http://" + addr
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(), "NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+url,
		"NEWSLETTER_SECRET="+secret, "NEWSLETTER_BASE_URL="+base)
	var apiErr bytes.Buffer
	api.Stderr = &apiErr
	if err := api.Start(); err != nil {
		cleanup()
		return "", nil, err
	}
	stop = func() {
		bench.Stop(api)
		cleanup()
	}
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		stop()
		return "", nil, fmt.Errorf("%w\n%s", err, apiErr.String())
	}
	return base, stop, nil
}

// expect turns a round trip into an error unless it redirected.
func expect(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusFound {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
