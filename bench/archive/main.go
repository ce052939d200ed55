// Command archive is `make bench-archive`: requests/s and p99 of a public
// archive page (GET /archive/{slug}) and of the Atom feed, served by the
// API role alone in its own process, after the first request (the pages
// come from the process's cache: no Redis round trip per request), next
// to GET /healthz (no I/O) as the HTTP and load generator's ceiling.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-archive:", err)
		os.Exit(1)
	}
}

// body is an issue of a usual size: a few paragraphs, a list and links.
var body = strings.Repeat("## A section\n\nSome **news** with [a link](https://example.com/a) and more text to read, as a letter has.\n\n- one point\n- another point\n\n", 12)

func run() error {
	ctx := context.Background()
	dur := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("BENCH_DURATION")); err == nil {
		dur = d
	}
	workers := 64
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	st := store.NewRedis(rdb)
	// Twenty sent issues, so the feed carries a full page of entries.
	var slug string
	for i := range 20 {
		is, err := st.CreateIssue(ctx, store.IssueContent{Subject: fmt.Sprintf("Letter %d", i+1), Preheader: "This month", Body: body, Topics: []string{"digest"}}, "")
		if err != nil {
			return err
		}
		if _, err := st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
			return err
		}
		if err := st.AdvanceIssuePlan(ctx, is.ID, 1, 0, 0, true); err != nil {
			return err
		}
		if _, err := st.FinishIssue(ctx, is.ID); err != nil {
			return err
		}
		slug = is.Slug
	}

	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return err
	}
	defer cleanup()
	addr, err := bench.FreeAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(), "NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+url,
		"NEWSLETTER_SECRET=benchmark-secret-0123456789", "NEWSLETTER_BASE_URL="+base)
	var apiErr bytes.Buffer
	api.Stderr = &apiErr
	if err := api.Start(); err != nil {
		return err
	}
	defer bench.Stop(api)
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		return fmt.Errorf("%w\n%s", err, apiErr.String())
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	tool := "Go load generator (install wrk for a leaner one)"
	if bench.HaveWrk() {
		tool = "wrk"
	}
	measure := func(path string, d time.Duration) (bench.Result, error) {
		// The first request fills the cache; it is not measured.
		if err := expect(hc.Get(base + path)); err != nil {
			return bench.Result{}, fmt.Errorf("%s: %w\n%s", path, err, apiErr.String())
		}
		if bench.HaveWrk() {
			return bench.Wrk(base+path, "", workers, d)
		}
		return bench.Load(workers, d, func(int64) error { return expect(hc.Get(base + path)) }), nil
	}
	page, err := measure("/archive/"+slug, dur)
	if err != nil {
		return err
	}
	feed, err := measure("/archive/feed.atom", dur)
	if err != nil {
		return err
	}
	health, err := measure("/healthz", dur/2)
	if err != nil {
		return err
	}
	fmt.Printf("redis %s, %d concurrent clients, %s each, HTTP load from %s\n", url, workers, dur, tool)
	fmt.Printf("GET /archive/{slug}      %s\n", page)
	fmt.Printf("GET /archive/feed.atom   %s  (20 entries)\n", feed)
	fmt.Printf("GET /healthz             %s  <- HTTP and load-generator ceiling (no I/O)\n", health)
	for _, r := range []struct {
		name string
		res  bench.Result
	}{{"page", page}, {"feed", feed}} {
		fmt.Printf("%-4s target 5000/s and p99 < 20ms: %.0f/s (%v), p99 %s (%v)\n", r.name, r.res.Rate(), r.res.Rate() >= 5000, r.res.P99.Round(time.Millisecond/10), r.res.P99 < 20*time.Millisecond)
	}
	return nil
}

// expect turns an HTTP round trip into an error unless it answered 200.
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
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
