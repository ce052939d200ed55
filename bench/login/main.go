// Command login is `make bench-login` (issue #41): N sign-ins (default
// 1,000) posted at once to POST /admin/login of the API role in its own
// process, half to an account with a wrong password, half to addresses
// without one, each from its own client address (a trusted proxy's
// X-Forwarded-For, so no client's failure budget stops them before the
// hash). Every password check is an argon2id hash of 19 MiB; the
// service runs at most one per core and answers the rest 503 with
// Retry-After after a short wait. It prints the process's resident
// memory before and at its peak (the kernel's VmHWM), the answers by
// status and the 503s, against the target of 300 MB.
package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

const (
	secret   = "benchmark-secret-0123456789"
	email    = "ed@example.org"
	password = "vintage lantern quokka"
	targetMB = 300
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-login:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("N")); err == nil && v > 0 {
		n = v
	}
	redisURL := bench.RedisURL()
	rdb, err := bench.Redis(ctx, redisURL)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	if err := makeAccount(ctx, store.NewRedis(rdb)); err != nil {
		return err
	}
	base, pid, stop, err := startAPI(redisURL)
	if err != nil {
		return err
	}
	defer stop()
	before, err := memKB(pid, "VmRSS")
	if err != nil {
		return err
	}
	start := time.Now()
	codes, retryAfter, errs := fire(base, n)
	took := time.Since(start)
	peak, err := memKB(pid, "VmHWM")
	if err != nil {
		return err
	}
	fmt.Printf("redis %s, %d sign-ins at once from %d client addresses, service on %d cores (GOMAXPROCS), in %s\n",
		redisURL, n, n, runtime.GOMAXPROCS(0), took.Round(time.Millisecond))
	fmt.Printf("answers: %s", describe(codes))
	if errs > 0 {
		fmt.Printf(", %d transport errors", errs)
	}
	fmt.Printf("\n503 (too many hashes at once): %d, Retry-After %q\n", codes[http.StatusServiceUnavailable], retryAfter)
	fmt.Printf("hashes' memory bound: %d slots x 19 MiB = %d MiB (account.Hasher)\n",
		accounts.Passwords.Slots(), accounts.Passwords.HashMemoryBound()>>20)
	fmt.Printf("RSS before %d MB, peak %d MB (VmHWM); target < %d MB: %v\n", before/1024, peak/1024, targetMB, peak/1024 < targetMB)
	return nil
}

// makeAccount stores ed's account as an accepted invite would.
func makeAccount(ctx context.Context, st *store.Redis) error {
	_, hash := accounts.NewInviteToken() // no link: the account is made here
	inv := store.Invite{Hash: hash, Email: email, Role: adminauth.Editor, By: "bench", Expires: time.Now().Add(time.Hour)}
	if err := st.CreateInvite(ctx, inv); err != nil {
		return err
	}
	totp, _, err := accounts.NewTOTP(email)
	if err != nil {
		return err
	}
	if _, err := st.InviteSecret(ctx, hash, totp); err != nil {
		return err
	}
	pw, err := accounts.Passwords.Hash(ctx, password)
	if err != nil {
		return err
	}
	_, err = st.AcceptInvite(ctx, hash, pw, 0, nil)
	return err
}

// fire posts n sign-ins at once, each on its own connection and from its
// own client address, and counts the answers by status.
func fire(base string, n int) (codes map[int]int, retryAfter string, errs int) {
	hc := &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: n, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       2 * time.Minute,
	}
	codes = map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			who := email
			if i%2 == 1 {
				who = "nobody" + strconv.Itoa(i) + "@example.org"
			}
			form := url.Values{"email": {who}, "password": {"a wrong guess " + strconv.Itoa(i)}, "code": {"123456"}}
			req, err := http.NewRequest(http.MethodPost, base+"/admin/login", strings.NewReader(form.Encode()))
			if err == nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
			}
			code, ra, err := status(hc, req, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			codes[code]++
			if code == http.StatusServiceUnavailable {
				retryAfter = ra
			}
		})
	}
	close(gate)
	wg.Wait()
	return codes, retryAfter, errs
}

func status(hc *http.Client, req *http.Request, err error) (int, string, error) {
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), err
}

func describe(codes map[int]int) string {
	var keys []int
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	var parts []string
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d x %d", codes[c], c))
	}
	return strings.Join(parts, ", ")
}

// memKB reads a field of /proc/pid/status in kB (VmRSS now, VmHWM the
// peak since the process started).
func memKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { bench.Warn("close status", f.Close()) }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// startAPI builds the binary and starts `newsletter api` on a free port
// against redisURL, trusting loopback as a proxy (each sign-in names its
// client in X-Forwarded-For), and waits until it answers.
func startAPI(redisURL string) (base string, pid int, stop func(), err error) {
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return "", 0, nil, err
	}
	addr, err := bench.FreeAddr()
	if err != nil {
		cleanup()
		return "", 0, nil, err
	}
	base = "http://" + addr
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(), "NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+redisURL,
		"NEWSLETTER_SECRET="+secret, "NEWSLETTER_BASE_URL="+base, "NEWSLETTER_TRUSTED_PROXIES=127.0.0.1/32")
	var apiErr bytes.Buffer
	api.Stderr = &apiErr
	if err := api.Start(); err != nil {
		cleanup()
		return "", 0, nil, err
	}
	stop = func() {
		bench.Stop(api)
		cleanup()
	}
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("%w\n%s", err, apiErr.String())
	}
	return base, api.Process.Pid, stop, nil
}
