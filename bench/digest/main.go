// Command digest is `make bench-digest N=100000 ITEMS=1,20`: it imports N
// subscribers from a generated CSV with `newsletter import` (timed, and
// Redis bytes per subscriber), then for each item count runs one digest
// through a `newsletter worker` process into a loopback SMTP sink and
// prints mails per second, the average mail size, the worker's and Redis's
// CPU per mail (utime+stime from /proc around the run), and the CPU per
// mail of a bare SMTP loop at the same mail size, run in a child process so
// the sink's own CPU is not counted. NEWSLETTER_BENCH_BIN=path measures a prebuilt binary
// with this harness.
//
// Beside them: the sink's CPU per mail (this process, which is mostly the
// sink: what our SMTP conversation costs a relay), what Redis did per mail
// (requests, commands, and the commands that took most of its time, from
// INFO), and what a DKIM signature of one of the digest's mails costs with
// an RSA-2048 and with an Ed25519 key (in a process of its own).
// DKIM=rsa,ed25519,both also sends the last digest again through a worker
// that signs with each (both: an RSA and an Ed25519 key together).
//
// ISSUE=1 (`make bench-issue`) also sends an issue of the last digest's
// size to the same readers through the same worker and prints its figures
// beside the digest's, with how often its Markdown was rendered
// (issue.go).
//
// The digest goes through its topic filter: one reader in UPDATES_ONLY
// (default 5) has only the updates topic, so the planner walks every
// subscriber and the digest reaches the others.
package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/store"
)

func main() {
	bench.RunBareChild()
	bench.RunDKIMChild()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-digest:", err)
		os.Exit(1)
	}
}

// figures are one digest run's measurements.
type figures struct {
	issue            bool    // an issue (issue.go), not a digest
	renders          float64 // issue bodies rendered from Markdown during the run
	items            int
	dkim             string // the signing key's kind, "" : unsigned
	rate             float64
	wall             time.Duration
	mails            int64
	mailSize         float64       // average bytes per mail
	workerCPU        time.Duration // per mail
	redisCPU         time.Duration // per mail
	sinkCPU          time.Duration // per mail: this process, which is mostly the sink
	bareCPU          time.Duration // per mail, at the same mail size
	bare             bench.Result
	workerIO, bareIO bench.ProcIO // over the sending, over the bare loop
	redis            bench.RedisStats
	sample           []byte // a mail of the digest, as the sink took it
	peakMem, baseMem int64
}

func run() error {
	cfg, err := readConfig()
	if err != nil {
		return err
	}
	ctx := context.Background()
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return err
	}
	defer cleanup()
	start, sinkKind := bench.StartSink, "offers PIPELINING and CHUNKING"
	if cfg.plainSink {
		start, sinkKind = bench.StartPlainSink, "offers neither PIPELINING nor CHUNKING (SINK=plain)"
	}
	sink, err := start()
	if err != nil {
		return err
	}
	defer sink.Close()
	fmt.Printf("the sink %s\n", sinkKind)

	dir, err := os.MkdirTemp("", "bench-digest")
	if err != nil {
		return err
	}
	defer func() { bench.Warn("remove temp folder", os.RemoveAll(dir)) }()
	h := &harness{
		ctx: ctx, bin: bin, dir: dir, rdb: rdb, sink: sink, audience: cfg.audience,
		env:        append(os.Environ(), "NEWSLETTER_REDIS_URL="+url, "NEWSLETTER_SECRET=benchmark-secret-0123456789"),
		profileDir: os.Getenv("NEWSLETTER_BENCH_PROFILE"), // a folder: CPU profiles of the worker, one per digest
	}
	importTook, subscribersMem, err := h.importSubscribers(cfg.n, cfg.every)
	if err != nil {
		return err
	}
	// After the import, which stamps the data version of a fresh Redis.
	if err := bench.SaveSettings(ctx, store.NewRedis(rdb), "the benchmark Redis"); err != nil {
		return err
	}
	if h.w, err = startWorker(bin, h.env, sink, h.profileDir); err != nil {
		return err
	}
	// The DKIM runs replace the worker: stop whichever runs last.
	defer func() { h.w.stop() }()

	fmt.Printf("%d subscribers, one digest per item count through `newsletter worker` (concurrency 16, 16 SMTP connections) into a loopback sink\n", cfg.n)
	fmt.Printf("import of %d rows        %s (%.0f rows/s)\n", cfg.n, importTook.Round(time.Millisecond), float64(cfg.n)/importTook.Seconds())
	fmt.Printf("redis used_memory         %.1f MB for the subscribers: %.0f bytes per subscriber\n", mb(subscribersMem), float64(subscribersMem)/float64(cfg.n))
	fmt.Printf("digest audience           %d of %d subscribers (the digest topic's; every %dth has updates only)\n", cfg.audience, cfg.n, cfg.every)
	if len(cfg.itemCounts) == 0 {
		return nil
	}
	runs, err := h.sendDigests(cfg.itemCounts)
	if err != nil {
		return err
	}
	peak := peakRSS(h.w.cmd.Process.Pid)
	signed, peak, err := h.sendSigned(cfg.itemCounts[len(cfg.itemCounts)-1], peak)
	if err != nil {
		return err
	}
	runs = append(runs, signed...)
	printTable(runs)
	fmt.Printf("worker peak RSS           %.1f MB (target < 60 MB)\n", mb(peak))
	printRedis(runs)
	printSystemCalls(runs)
	// What signing costs, measured apart on a mail the sink took.
	return printDKIMCost(runs[len(cfg.itemCounts)-1].sample)
}

// config is what the environment asks of a run.
type config struct {
	n          int   // subscribers, N
	itemCounts []int // one digest per count, ITEMS; none: the import alone
	every      int   // every every-th reader has updates only, UPDATES_ONLY; 0: none
	audience   int   // the digest topic's readers among the n
	plainSink  bool  // SINK=plain: the sink offers no PIPELINING and no CHUNKING
}

func readConfig() (config, error) {
	c := config{n: 100000, every: 5}
	if v, err := strconv.Atoi(os.Getenv("N")); err == nil && v > 0 {
		c.n = v
	}
	for _, f := range strings.Split(cmp.Or(os.Getenv("ITEMS"), "1,20"), ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 0 {
			return c, fmt.Errorf("ITEMS=%q: want item counts such as 1,20 (0: the import alone)", os.Getenv("ITEMS"))
		}
		if k > 0 {
			c.itemCounts = append(c.itemCounts, k)
		}
	}
	switch os.Getenv("SINK") {
	case "", "extended":
	case "plain":
		c.plainSink = true
	default:
		return c, fmt.Errorf("SINK=%q: extended (the default: the sink offers PIPELINING and CHUNKING) or plain (neither)", os.Getenv("SINK"))
	}
	if v, err := strconv.Atoi(os.Getenv("UPDATES_ONLY")); err == nil && v >= 0 {
		c.every = v
	}
	c.audience = c.n
	if c.every > 0 {
		c.audience = c.n - (c.n+c.every-1)/c.every
	}
	return c, nil
}

// harness is what every sending of a run shares: the binary, the Redis,
// the sink and the worker sending into it.
type harness struct {
	ctx        context.Context
	bin, dir   string // dir: a temporary folder for the CSV and DKIM keys
	env        []string
	rdb        *redis.Client
	sink       *bench.Sink
	w          *worker
	profileDir string // a folder for the worker's CPU profiles, "" : none
	audience   int
	baseMem    int64 // Redis's used_memory after the import
}

// importSubscribers writes n readers to a CSV and times `newsletter
// import` of it, returning how long it took and the Redis memory the
// subscribers took; it records the memory after it as the base that each
// run's peak is measured over.
func (h *harness) importSubscribers(n, every int) (time.Duration, int64, error) {
	csv := filepath.Join(h.dir, "subscribers.csv")
	if err := writeCSV(csv, n, every); err != nil {
		return 0, 0, err
	}
	memBefore := usedMemory(h.ctx, h.rdb)
	start := time.Now()
	imp := exec.Command(h.bin, "import", "--quiet", csv)
	imp.Env, imp.Stderr = h.env, os.Stderr
	out, err := imp.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("import: %v\n%s", err, out)
	}
	importTook := time.Since(start)
	h.baseMem = usedMemory(h.ctx, h.rdb)
	return importTook, h.baseMem - memBefore, nil
}

// sendDigests runs one digest per item count and, with ISSUE set, an
// issue of the last digest's size, all through the same worker.
func (h *harness) sendDigests(itemCounts []int) ([]figures, error) {
	var runs []figures
	for _, k := range itemCounts {
		f, err := digest(h.ctx, h.bin, h.env, h.rdb, h.sink, h.w, h.audience, k, "")
		if err != nil {
			return nil, err
		}
		f.baseMem = h.baseMem
		runs = append(runs, f)
	}
	if os.Getenv("ISSUE") != "" {
		// bench-issue: an issue of the last digest's size to the same
		// readers, through the same worker (issue.go).
		f, err := sendIssue(h.ctx, h.bin, h.dir, h.env, h.rdb, h.sink, h.w, h.audience, itemCounts[len(itemCounts)-1])
		if err != nil {
			return nil, err
		}
		f.baseMem = h.baseMem
		runs = append(runs, f)
	}
	return runs, nil
}

// sendSigned, for DKIM=rsa,ed25519: the digest of k items again through
// a worker that signs, one per key kind, each replacing the last. It
// returns their figures and the worker peak RSS so far, peak included.
func (h *harness) sendSigned(k int, peak int64) ([]figures, int64, error) {
	var runs []figures
	for _, alg := range strings.FieldsFunc(os.Getenv("DKIM"), func(r rune) bool { return r == ',' }) {
		h.w.stop()
		keyEnv, err := dkimEnv(h.dir, alg)
		if err != nil {
			return nil, 0, err
		}
		signing, err := startWorker(h.bin, append(h.env, keyEnv...), h.sink, h.profileDir)
		if err != nil {
			return nil, 0, fmt.Errorf("worker signing with DKIM %s: %w", alg, err)
		}
		h.w = signing
		f, err := digest(h.ctx, h.bin, h.env, h.rdb, h.sink, h.w, h.audience, k, alg)
		if err != nil {
			return nil, 0, err
		}
		f.baseMem = h.baseMem
		runs = append(runs, f)
		peak = max(peak, peakRSS(h.w.cmd.Process.Pid))
	}
	return runs, peak, nil
}

// printTable prints the runs side by side as a Markdown table.
func printTable(runs []figures) {
	fmt.Println()
	fmt.Println("| items | mail size | mails/s | worker CPU/mail | Redis CPU/mail | bare loop CPU/mail (same size) | worker/bare | sink CPU/mail | Redis peak over base |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, f := range runs {
		items := strconv.Itoa(f.items)
		if f.issue {
			items = fmt.Sprintf("issue (Markdown, %d sections)", f.items)
		}
		if f.dkim != "" {
			items += ", DKIM " + dkimName(f.dkim)
		}
		fmt.Printf("| %s | %.1f KB | %.0f | %d µs | %d µs | %d µs | %.2f | %d µs | +%.1f MB |\n", items, f.mailSize/1000, f.rate,
			f.workerCPU.Microseconds(), f.redisCPU.Microseconds(), f.bareCPU.Microseconds(),
			float64(f.workerCPU)/float64(f.bareCPU), f.sinkCPU.Microseconds(), mb(f.peakMem-f.baseMem))
	}
}

// printRedis prints what Redis did per mail in each run.
func printRedis(runs []figures) {
	for _, f := range runs {
		if f.issue {
			fmt.Printf("Redis for the issue: %s\n", f.redis.PerMail(f.mails, 6))
			fmt.Printf("issue Markdown rendered %v time(s) for %d mails (newsletter_issue_renders_total)\n", f.renders, f.mails)
			continue
		}
		fmt.Printf("Redis at %2d item(s)%s: %s\n", f.items, map[bool]string{true: " DKIM " + f.dkim}[f.dkim != ""], f.redis.PerMail(f.mails, 6))
	}
}

// printSystemCalls prints, per mail, the system calls that read and
// wrote and the bytes written, of the worker over its sending and of the
// bare loop at the same mail size (bench.ProcIO: the process's own
// counters; calls that move no data are not among them). The worker's
// include its Redis traffic; the bare loop has none.
func printSystemCalls(runs []figures) {
	fmt.Println()
	fmt.Println("| items | worker read calls/mail | worker write calls/mail | worker bytes written/mail | bare read calls/mail | bare write calls/mail | bare bytes written/mail |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, f := range runs {
		items := strconv.Itoa(f.items)
		if f.issue {
			items = "issue"
		}
		if f.dkim != "" {
			items += ", DKIM " + dkimName(f.dkim)
		}
		wr, ww, wb := f.workerIO.PerOp(f.mails)
		br, bw, bb := f.bareIO.PerOp(f.bare.Ops)
		fmt.Printf("| %s | %.2f | %.2f | %.0f | %.2f | %.2f | %.0f |\n", items, wr, ww, wb, br, bw, bb)
	}
}

// printDKIMCost prints the CPU of one RSA and one Ed25519 signature of
// mail, each in a process of its own; no mail: nothing.
func printDKIMCost(mail []byte) error {
	if len(mail) == 0 {
		return nil
	}
	fmt.Printf("DKIM signature of a %.1f KB mail, CPU each (a process of its own):", float64(len(mail))/1000)
	for _, alg := range []string{"rsa", "ed25519"} {
		cpu, err := bench.DKIMCPU(mail, alg, 2*time.Second)
		if err != nil {
			return err
		}
		fmt.Printf(" %s %d µs", dkimName(alg), cpu.Microseconds())
	}
	fmt.Println()
	return nil
}

// worker is a running `newsletter worker`.
type worker struct {
	cmd     *exec.Cmd
	addr    string
	stderr  *strings.Builder
	profile string // a folder for CPU profiles, "" : none
	stopped bool
}

func startWorker(bin string, env []string, sink *bench.Sink, profileDir string) (*worker, error) {
	addr, err := bench.FreeAddr()
	if err != nil {
		return nil, err
	}
	workerEnv := append(env, "NEWSLETTER_ADDR="+addr, "NEWSLETTER_SMTP_URL=smtp://"+sink.Addr+"?tls=none",
		"NEWSLETTER_SEND_RATE=1000000", "NEWSLETTER_CONCURRENCY=16", "NEWSLETTER_SMTP_POOL=16", "NEWSLETTER_POLL_INTERVAL=100ms")
	if profileDir != "" {
		workerEnv = append(workerEnv, "NEWSLETTER_PPROF=true", "NEWSLETTER_ADMIN_TOKEN=bench-profile-token")
	}
	w := &worker{cmd: exec.Command(bin, "worker"), addr: addr, stderr: &strings.Builder{}, profile: profileDir}
	w.cmd.Env, w.cmd.Stderr = workerEnv, w.stderr
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	if err := bench.WaitHTTP("http://" + addr + "/healthz"); err != nil {
		w.stop()
		return nil, fmt.Errorf("%w\n%s", err, w.stderr.String())
	}
	return w, nil
}

func (w *worker) stop() {
	if !w.stopped {
		w.stopped = true
		bench.Stop(w.cmd)
	}
}

// dkimEnv writes fresh keys for alg ("rsa", "ed25519", or "both": an RSA
// and an Ed25519 key signing together, as RFC 8463 advises) into dir and
// returns the worker's settings for them.
func dkimEnv(dir, alg string) ([]string, error) {
	write := func(kind string) (string, error) {
		var key crypto.Signer
		var err error
		if kind == "rsa" {
			key, err = rsa.GenerateKey(rand.Reader, 2048)
		} else {
			_, key, err = ed25519.GenerateKey(rand.Reader)
		}
		if err != nil {
			return "", err
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", err
		}
		file := filepath.Join(dir, "dkim-"+kind+".pem")
		return file, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	}
	env := []string{"NEWSLETTER_FROM=News <news@example.com>", "NEWSLETTER_DKIM_DOMAIN=example.com", "NEWSLETTER_DKIM_SELECTOR=bench"}
	switch alg {
	case "rsa", "ed25519":
		file, err := write(alg)
		return append(env, "NEWSLETTER_DKIM_KEY_FILE="+file), err
	case "both":
		rsaFile, err := write("rsa")
		if err != nil {
			return nil, err
		}
		edFile, err := write("ed25519")
		return append(env, "NEWSLETTER_DKIM_KEY_FILE="+rsaFile, "NEWSLETTER_DKIM_ED25519_KEY_FILE="+edFile,
			"NEWSLETTER_DKIM_ED25519_SELECTOR=bench-ed"), err
	}
	return nil, fmt.Errorf("DKIM=%s: want rsa, ed25519, both, or a list of them", alg)
}

func dkimName(alg string) string {
	switch alg {
	case "rsa":
		return "RSA-2048"
	case "both":
		return "RSA-2048 + Ed25519"
	}
	return "Ed25519"
}

// digest adds k items, runs one digest to its n readers and measures
// it: wall time, the worker's and Redis's CPU, the mails' size, and a bare
// SMTP loop at the same mail size.
func digest(ctx context.Context, bin string, env []string, rdb *redis.Client, sink *bench.Sink, w *worker, n, k int, dkim string) (figures, error) {
	f := figures{items: k, dkim: dkim}
	if err := addItems(bin, env, k); err != nil {
		return f, err
	}
	period := fmt.Sprintf("bench-%d-%d", time.Now().Unix(), k)
	err := measure(ctx, rdb, sink, w, n, &f, func() error {
		dr := exec.Command(bin, "digest", "run", "--period", period)
		dr.Env = env
		if out, err := dr.CombinedOutput(); err != nil {
			return fmt.Errorf("digest run: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	signed := ""
	if dkim != "" {
		signed = ", DKIM " + dkimName(dkim)
	}
	fmt.Printf("%2d item(s)%s: %.0f mails/s, wall %s, %.1f KB a mail; bare loop at that size %s\n",
		k, signed, f.rate, f.wall.Round(time.Millisecond), f.mailSize/1000, f.bare)
	return f, nil
}

// measure runs send (what starts a sending to n readers) and measures
// the sending into f: wall time until the sink took n mails, the
// worker's, Redis's and the sink's CPU, Redis's requests, the mails'
// size, and a bare SMTP loop at the same mail size.
func measure(ctx context.Context, rdb *redis.Client, sink *bench.Sink, w *worker, n int, f *figures, send func() error) error {
	sent0, bytes0 := sink.Accepted(), sink.Bytes()
	wcpu0, err := bench.ProcCPU(w.cmd.Process.Pid)
	if err != nil {
		return err
	}
	wio0, err := bench.ReadProcIO(w.cmd.Process.Pid)
	if err != nil {
		return err
	}
	rcpu0, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return err
	}
	scpu0, err := bench.ProcCPU(os.Getpid())
	if err != nil {
		return err
	}
	stats0, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := send(); err != nil {
		return err
	}
	if w.profile != "" {
		name := fmt.Sprintf("cpu-%ditems%s.pprof", f.items, map[bool]string{true: "-dkim-" + f.dkim}[f.dkim != ""])
		if f.issue {
			name = "cpu-issue.pprof"
		}
		go saveProfile("http://"+w.addr, filepath.Join(w.profile, name))
	}
	f.peakMem = usedMemory(ctx, rdb)
	for sink.Accepted()-sent0 < int64(n) {
		if time.Since(start) > 30*time.Minute {
			return fmt.Errorf("only %d of %d mails after 30 minutes\n%s", sink.Accepted()-sent0, n, w.stderr.String())
		}
		f.peakMem = max(f.peakMem, usedMemory(ctx, rdb))
		time.Sleep(50 * time.Millisecond)
	}
	f.wall = time.Since(start)
	wcpu1, err := bench.ProcCPU(w.cmd.Process.Pid)
	if err != nil {
		return err
	}
	wio1, err := bench.ReadProcIO(w.cmd.Process.Pid)
	if err != nil {
		return err
	}
	f.workerIO = wio1.Since(wio0)
	rcpu1, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return err
	}
	scpu1, err := bench.ProcCPU(os.Getpid())
	if err != nil {
		return err
	}
	stats1, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return err
	}
	mails := sink.Accepted() - sent0
	f.mails, f.redis, f.sample = mails, stats1.Since(stats0), sink.Sample()
	f.sinkCPU = (scpu1 - scpu0) / time.Duration(mails)
	f.rate = float64(mails) / f.wall.Seconds()
	f.mailSize = float64(sink.Bytes()-bytes0) / float64(mails)
	f.workerCPU = (wcpu1 - wcpu0) / time.Duration(mails)
	f.redisCPU = (rcpu1 - rcpu0) / time.Duration(mails)
	bare, err := bench.BareLoopCPU(sink.Addr, int(f.mailSize), bench.Duration(3*time.Second))
	f.bare, f.bareCPU, f.bareIO = bare.Result, bare.CPU, bare.IO
	return err
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// writeCSV writes n readers; every every-th one (0: none) has only the
// updates topic, the others both.
func writeCSV(path string, n, every int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "email,name,timezone,topics")
	for i := 0; i < n; i++ {
		topics := "digest;updates"
		if every > 0 && i%every == 0 {
			topics = "updates"
		}
		fmt.Fprintf(w, "reader%07d@example.org,Reader %d,,%s\n", i, i, topics)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// addItems posts k digest items through a short-lived API process.
func addItems(bin string, env []string, k int) error {
	addr, err := bench.FreeAddr()
	if err != nil {
		return err
	}
	api := exec.Command(bin, "api")
	api.Env = append(env, "NEWSLETTER_ADDR="+addr, "NEWSLETTER_ADMIN_TOKEN=bench-admin-token-0123")
	if err := api.Start(); err != nil {
		return err
	}
	defer bench.Stop(api)
	if err := bench.WaitHTTP("http://" + addr + "/healthz"); err != nil {
		return err
	}
	for i := 0; i < k; i++ {
		// The item of the first benchmarks, numbered: 20 of them make a
		// mail of about 7 KB, the size listmonk was measured at.
		body, _ := json.Marshal(map[string]string{
			"title":   fmt.Sprintf("Benchmark item %d", i+1),
			"url":     fmt.Sprintf("https://example.com/bench/%d", i+1),
			"summary": "What the benchmark sends.",
		})
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/items", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer bench-admin-token-0123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		bench.Warn("close response", resp.Body.Close())
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("add item: %s", resp.Status)
		}
	}
	return nil
}

// usedMemory is Redis's used_memory in bytes.
func usedMemory(ctx context.Context, rdb *redis.Client) int64 {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// peakRSS reads the process's high-water mark of resident memory.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// saveProfile takes a 5-second CPU profile of the worker into path.
func saveProfile(base, path string) {
	req, _ := http.NewRequest("GET", base+"/debug/pprof/profile?seconds=5", nil)
	req.Header.Set("Authorization", "Bearer bench-profile-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		bench.Warn("profile", err)
		return
	}
	defer func() { bench.Warn("close profile", resp.Body.Close()) }()
	f, err := os.Create(path)
	if err != nil {
		bench.Warn("profile", err)
		return
	}
	_, err = io.Copy(f, resp.Body)
	bench.Warn("write profile", errors.Join(err, f.Close()))
}
