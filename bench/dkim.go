package bench

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/newsletter/newsletter/channels/email"
)

// DKIM's cost per mail is measured in a child process of its own, like the
// bare loop: the child signs a mail the sink received, over and over, with
// a fresh key of the kind asked for, and reports the CPU it used for that
// (the key's generation not counted).
const dkimChildEnv = "NEWSLETTER_BENCH_DKIM_CHILD"

type dkimJob struct {
	Alg      string // "rsa" (2048 bits) or "ed25519"
	Mail     []byte
	Duration time.Duration
}

type dkimResult struct {
	Ops int64
	CPU time.Duration
}

// RunDKIMChild signs and exits when this process is the child DKIMCPU
// started; otherwise it returns at once. Benchmarks call it first thing in
// main.
func RunDKIMChild() {
	raw := os.Getenv(dkimChildEnv)
	if raw == "" {
		return
	}
	res, err := dkimChild(raw)
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dkim child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func dkimChild(raw string) (dkimResult, error) {
	var job dkimJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		return dkimResult{}, err
	}
	var key crypto.Signer
	var err error
	switch job.Alg {
	case "rsa":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("unknown key kind %q", job.Alg)
	}
	if err != nil {
		return dkimResult{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return dkimResult{}, err
	}
	dir, err := os.MkdirTemp("", "bench-dkim")
	if err != nil {
		return dkimResult{}, err
	}
	defer func() { Warn("remove temp folder", os.RemoveAll(dir)) }()
	file := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return dkimResult{}, err
	}
	signer, err := email.NewDKIMSigner(file, "example.com", "bench")
	if err != nil {
		return dkimResult{}, err
	}
	cpu0 := selfCPU()
	var res dkimResult
	for end := time.Now().Add(job.Duration); time.Now().Before(end); res.Ops++ {
		if _, err := signer.SignMessage(job.Mail); err != nil {
			return res, err
		}
	}
	res.CPU = selfCPU() - cpu0
	return res, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// DKIMCPU is the CPU one DKIM signature of mail costs with a key of kind
// alg ("rsa": 2048 bits, or "ed25519"), signing for d in a child process.
func DKIMCPU(mail []byte, alg string, d time.Duration) (time.Duration, error) {
	job, err := json.Marshal(dkimJob{Alg: alg, Mail: mail, Duration: d})
	if err != nil {
		return 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), dkimChildEnv+"="+string(job))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("dkim %s: %w", alg, err)
	}
	var res dkimResult
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("dkim %s: %w", alg, err)
	}
	if res.Ops == 0 {
		return 0, fmt.Errorf("dkim %s: no signature in %s", alg, d)
	}
	return res.CPU / time.Duration(res.Ops), nil
}
