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
	dur := bench.Duration(10 * time.Second)
	workers := 64
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	slug, err := seedIssues(ctx, store.NewRedis(rdb))
	if err != nil {
		return err
	}
	srv, stop, err := startAPI(url, workers)
	if err != nil {
		return err
	}
	defer stop()
	tool := "Go load generator (install wrk for a leaner one)"
	if bench.HaveWrk() {
		tool = "wrk"
	}
	page, err := srv.measure("/archive/"+slug, dur)
	if err != nil {
		return err
	}
	feed, err := srv.measure("/archive/feed.atom", dur)
	if err != nil {
		return err
	}
	health, err := srv.measure("/healthz", dur/2)
	if err != nil {
		return err
	}
	report(url, workers, dur, tool, page, feed, health)
	return nil
}

// seedIssues stores twenty sent issues, so the feed carries a full page of
// entries, and returns the last one's slug for the page to fetch.
func seedIssues(ctx context.Context, st *store.Redis) (string, error) {
	var slug string
	for i := range 20 {
		is, err := st.CreateIssue(ctx, store.IssueContent{Subject: fmt.Sprintf("Letter %d", i+1), Preheader: "This month", Body: body, Topics: []string{"digest"}}, "")
		if err != nil {
			return "", err
		}
		if _, err := st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
			return "", err
		}
		if err := st.AdvanceIssuePlan(ctx, is.ID, 1, store.WalkByID, 0, 0, true); err != nil {
			return "", err
		}
		if _, err := st.FinishIssue(ctx, is.ID); err != nil {
			return "", err
		}
		slug = is.Slug
	}
	return slug, nil
}

// apiServer is the API role running in a process of its own, so the load
// generator's CPU is not the server's, and a client sized for the load.
type apiServer struct {
	base    string
	stderr  *bytes.Buffer // the process's log, shown when it fails
	hc      *http.Client
	workers int
}

// startAPI builds the binary and starts `newsletter api` on a free port
// against url, waiting until it answers. stop ends the process, then
// removes the binary.
func startAPI(url string, workers int) (srv *apiServer, stop func(), err error) {
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return nil, nil, err
	}
	addr, err := bench.FreeAddr()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	base := "http://" + addr
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(), "NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+url,
		"NEWSLETTER_SECRET=benchmark-secret-0123456789", "NEWSLETTER_BASE_URL="+base)
	var apiErr bytes.Buffer
	api.Stderr = &apiErr
	if err := api.Start(); err != nil {
		cleanup()
		return nil, nil, err
	}
	stop = func() {
		bench.Stop(api)
		cleanup()
	}
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		stop()
		return nil, nil, fmt.Errorf("%w\n%s", err, apiErr.String())
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	return &apiServer{base: base, stderr: &apiErr, hc: hc, workers: workers}, stop, nil
}

// measure loads path for d with wrk if installed, else the Go load
// generator.
func (s *apiServer) measure(path string, d time.Duration) (bench.Result, error) {
	// The first request fills the cache; it is not measured.
	if err := expect(s.hc.Get(s.base + path)); err != nil {
		return bench.Result{}, fmt.Errorf("%s: %w\n%s", path, err, s.stderr.String())
	}
	if bench.HaveWrk() {
		return bench.Wrk(s.base+path, "", s.workers, d)
	}
	return bench.Load(s.workers, d, func(int64) error { return expect(s.hc.Get(s.base + path)) }), nil
}

// report prints the three results and how the page and the feed fare
// against their targets.
func report(url string, workers int, dur time.Duration, tool string, page, feed, health bench.Result) {
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
