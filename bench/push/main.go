// Command push is `make bench-push`: encrypted web push notifications per
// second, and CPU per notification, from push.Client (the push lane's
// sender: a fresh key and salt per message, RFC 8291 encryption, the VAPID
// header, the netguard client, the answer read and classified) into a
// local push service, next to a bare loop that only encrypts (the same
// encryption) and posts with a plain http.Client, in the same run.
//
// Each sender runs in a child process (this binary again), so its CPU is
// measured apart from the push service's, which runs here and checks one
// message in a hundred by decrypting it with the browser's keys.
package main

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
)

// childEnv carries a sender's job to a child process.
const childEnv = "NEWSLETTER_BENCH_PUSH_CHILD"

type job struct {
	Mode        string // "client" or "bare"
	Endpoint    string
	P256DH      []byte
	Auth        []byte
	VAPIDPublic string
	VAPIDPriv   string
	Workers     int
	Duration    time.Duration
}

// payload is a typical notification: an issue's subject and link.
var payload = []byte(`{"title":"Issue 42: what changed this week","body":"A new issue is out.","url":"https://news.example.com/issues/42"}`)

func main() {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(child(raw))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-push:", err)
		os.Exit(1)
	}
}

func run() error {
	dur := bench.Duration(5 * time.Second)
	workers := 32 // NEWSLETTER_PUSH_CONCURRENCY's default
	if n, err := strconv.Atoi(os.Getenv("BENCH_WORKERS")); err == nil && n > 0 {
		workers = n
	}
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return err
	}
	svc, sub, err := startService()
	if err != nil {
		return err
	}
	defer svc.close()

	fmt.Printf("web push of a %d-byte notification to a local push service, %d senders, %s each, %d CPUs\n",
		len(payload), workers, dur, runtime.NumCPU())
	base := job{Endpoint: sub.Endpoint, P256DH: sub.P256DH, Auth: sub.Auth, VAPIDPublic: pub, VAPIDPriv: priv, Workers: workers, Duration: dur}
	// A first, unreported second warms the push service (its heap, its
	// goroutines' stacks): the first sender measured would pay for it.
	warm := base
	warm.Mode, warm.Duration = "bare", time.Second
	if _, _, err := runChild(warm); err != nil {
		return err
	}
	var bareRate float64
	for _, mode := range []string{"bare", "client"} {
		j := base
		j.Mode = mode
		res, cpu, err := runChild(j)
		if err != nil {
			return err
		}
		label := map[string]string{"bare": "bare loop (encrypt + http.Client POST)", "client": "push.Client.Send (the lane's sender)"}[mode]
		line := fmt.Sprintf("%-40s %s  CPU %s/notification", label, res, cpu.Round(time.Microsecond))
		if mode == "bare" {
			bareRate = res.Rate()
		} else {
			line += fmt.Sprintf("  %3.0f%% of bare", 100*res.Rate()/bareRate)
		}
		fmt.Println(line)
	}
	checked, bad := svc.checked.Load(), svc.bad.Load()
	fmt.Printf("push service: %d messages taken, %d decrypted and checked, %d did not decrypt\n", svc.taken.Load(), checked, bad)
	if bad > 0 || checked == 0 {
		return errors.New("the push service could not decrypt what was sent")
	}
	fmt.Println("target: at least 2,000 notifications/s through push.Client.Send")
	return nil
}

// service is the local push service: it takes every message (201), and
// decrypts one in a hundred with the browser's keys.
type service struct {
	srv                  *http.Server
	ln                   net.Listener
	key                  *ecdh.PrivateKey
	auth                 []byte
	taken, checked, bad  atomic.Int64
	wantPlaintextPayload []byte
}

func startService() (*service, webpush.Subscription, error) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, webpush.Subscription{}, err
	}
	auth := make([]byte, 16)
	if _, err := rand.Read(auth); err != nil {
		return nil, webpush.Subscription{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, webpush.Subscription{}, err
	}
	s := &service{ln: ln, key: key, auth: auth, wantPlaintextPayload: payload}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			bench.Warn("push service", err)
		}
	}()
	return s, webpush.Subscription{Endpoint: "http://" + ln.Addr().String() + "/push/bench", P256DH: key.PublicKey().Bytes(), Auth: auth}, nil
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
	if err != nil || r.Header.Get("Authorization") == "" || r.Header.Get("Content-Encoding") != "aes128gcm" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if n := s.taken.Add(1); n%100 == 1 {
		plain, err := webpushtest.Decrypt(s.key, s.auth, body)
		if err != nil || !bytes.Equal(plain, s.wantPlaintextPayload) {
			s.bad.Add(1)
		} else {
			s.checked.Add(1)
		}
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *service) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bench.Warn("stop the push service", s.srv.Shutdown(ctx))
}

// runChild runs one sender in a child process and returns its result and
// CPU (user + system) per notification.
func runChild(j job) (bench.Result, time.Duration, error) {
	raw, err := json.Marshal(j)
	if err != nil {
		return bench.Result{}, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return bench.Result{}, 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return bench.Result{}, 0, fmt.Errorf("%s sender: %w", j.Mode, err)
	}
	var res bench.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return bench.Result{}, 0, fmt.Errorf("%s sender: %w", j.Mode, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || res.Ops == 0 {
		return res, 0, fmt.Errorf("%s sender: no notifications or no resource usage", j.Mode)
	}
	return res, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) / time.Duration(res.Ops), nil
}

// child runs a sender and prints its result as JSON.
func child(raw string) int {
	var j job
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		fmt.Fprintln(os.Stderr, "sender:", err)
		return 2
	}
	v, err := webpush.NewVAPID(j.VAPIDPublic, j.VAPIDPriv, "mailto:bench@example.com")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sender:", err)
		return 2
	}
	sub := webpush.Subscription{Endpoint: j.Endpoint, P256DH: j.P256DH, Auth: j.Auth}
	var op func(int64) error
	switch j.Mode {
	case "client":
		// The lane's client: netguard's (private addresses allowed for
		// the loopback service), as the worker builds it.
		g := netguard.Guard{AllowPrivate: true}
		c := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 10 * time.Second, MaxResponse: 4096}))
		ctx := context.Background()
		op = func(int64) error { return c.Send(ctx, sub, payload, webpush.Options{TTL: time.Hour}) }
	case "bare":
		// Only what a push needs: encrypt, and post with a header signed
		// once.
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: j.Workers}}
		header, err := v.Authorization(j.Endpoint)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sender:", err)
			return 2
		}
		op = func(int64) error {
			body, err := webpush.Encrypt(sub, payload)
			if err != nil {
				return err
			}
			req, err := http.NewRequest(http.MethodPost, j.Endpoint, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header["Authorization"] = []string{header}
			req.Header["Content-Encoding"] = []string{"aes128gcm"}
			req.Header["Ttl"] = []string{"3600"}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
	default:
		fmt.Fprintln(os.Stderr, "sender: unknown mode", j.Mode)
		return 2
	}
	res := bench.Load(j.Workers, j.Duration, op)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}
