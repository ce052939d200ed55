// Command digest is `make bench-digest N=100000`: it imports N subscribers
// from a generated CSV with `newsletter import` (timed), runs one digest
// through a `newsletter worker` process into a loopback SMTP sink, and
// prints mails per second, wall time, peak Redis memory, the worker's peak
// RSS, and the rate of a bare SMTP loop against the same sink.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-digest:", err)
		os.Exit(1)
	}
}

func run() error {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("N")); err == nil && v > 0 {
		n = v
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
	sink, err := bench.StartSink()
	if err != nil {
		return err
	}
	defer sink.Close()
	bare, err := bench.BareLoop(sink.Addr, bench.Body4K, 3*time.Second)
	if err != nil {
		return err
	}

	dir, _ := os.MkdirTemp("", "bench-digest")
	defer func() { bench.Warn("remove temp folder", os.RemoveAll(dir)) }()
	csv := filepath.Join(dir, "subscribers.csv")
	if err := writeCSV(csv, n); err != nil {
		return err
	}
	env := append(os.Environ(), "NEWSLETTER_REDIS_URL="+url, "NEWSLETTER_SECRET=benchmark-secret-0123456789")
	start := time.Now()
	imp := exec.Command(bin, "import", "--quiet", csv)
	imp.Env, imp.Stderr = env, os.Stderr
	out, err := imp.Output()
	if err != nil {
		return fmt.Errorf("import: %v\n%s", err, out)
	}
	importTook := time.Since(start)
	baseMem := usedMemory(ctx, rdb)

	addr, err := bench.FreeAddr()
	if err != nil {
		return err
	}
	workerEnv := append(env, "NEWSLETTER_ADDR="+addr, "NEWSLETTER_SMTP_URL=smtp://"+sink.Addr+"?tls=none",
		"NEWSLETTER_SEND_RATE=1000000", "NEWSLETTER_CONCURRENCY=16", "NEWSLETTER_SMTP_POOL=16", "NEWSLETTER_POLL_INTERVAL=100ms")
	worker := exec.Command(bin, "worker")
	worker.Env = workerEnv
	var werr strings.Builder
	worker.Stderr = &werr
	if err := worker.Start(); err != nil {
		return err
	}
	defer bench.Stop(worker)
	if err := bench.WaitHTTP("http://" + addr + "/healthz"); err != nil {
		return fmt.Errorf("%w\n%s", err, werr.String())
	}

	period := fmt.Sprintf("bench-%d", time.Now().Unix())
	if err := addItem(bin, env); err != nil {
		return err
	}
	sent0 := sink.Accepted()
	start = time.Now()
	dr := exec.Command(bin, "digest", "run", "--period", period)
	dr.Env = env
	if out, err := dr.CombinedOutput(); err != nil {
		return fmt.Errorf("digest run: %v\n%s", err, out)
	}
	peakMem := baseMem
	for sink.Accepted()-sent0 < int64(n) {
		if time.Since(start) > 30*time.Minute {
			return fmt.Errorf("only %d of %d mails after 30 minutes\n%s", sink.Accepted()-sent0, n, werr.String())
		}
		peakMem = max(peakMem, usedMemory(ctx, rdb))
		time.Sleep(50 * time.Millisecond)
	}
	wall := time.Since(start)
	rate := float64(n) / wall.Seconds()
	rss := peakRSS(worker.Process.Pid)
	fmt.Printf("%d subscribers, one digest through `newsletter worker` (concurrency 16, 16 SMTP connections) into a loopback sink\n", n)
	fmt.Printf("import of %d rows        %s (%.0f rows/s)\n", n, importTook.Round(time.Millisecond), float64(n)/importTook.Seconds())
	fmt.Printf("digest                    %.0f mails/s, wall time %s\n", rate, wall.Round(time.Millisecond))
	fmt.Printf("bare SMTP loop            %s  -> digest at %.0f%% of it (target >= 60%%)\n", bare, 100*rate/bare.Rate())
	fmt.Printf("redis used_memory         %.1f MB with the subscribers, peak %.1f MB during the run (+%.1f MB)\n",
		mb(baseMem), mb(peakMem), mb(peakMem-baseMem))
	fmt.Printf("worker peak RSS           %.1f MB (target < 60 MB)\n", mb(rss))
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func writeCSV(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "email,name,timezone")
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "reader%07d@example.org,Reader %d,\n", i, i)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// addItem posts one digest item through a short-lived API process.
func addItem(bin string, env []string) error {
	addr, err := bench.FreeAddr()
	if err != nil {
		return err
	}
	api := exec.Command(bin, "api")
	api.Env = append(env, "NEWSLETTER_ADDR="+addr, "NEWSLETTER_ADMIN_TOKEN=bench")
	if err := api.Start(); err != nil {
		return err
	}
	defer bench.Stop(api)
	if err := bench.WaitHTTP("http://" + addr + "/healthz"); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"title": "Benchmark item", "url": "https://example.com/bench", "summary": "What the benchmark sends."})
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/items", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	bench.Warn("close response", resp.Body.Close())
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("add item: %s", resp.Status)
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
