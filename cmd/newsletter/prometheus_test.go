package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/deploy"
	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// TestOperatorSignalsInPrometheus runs the real Prometheus (Debian's
// prometheus; skipped where it is not installed) against two API processes
// and a worker, with the project's alert rules, drives a little traffic (a
// delivered welcome, a bounce, a rejection, a digest), and evaluates every
// dashboard panel and every alert expression through Prometheus's HTTP API.
func TestOperatorSignalsInPrometheus(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (apt-get install prometheus)")
	}
	if testing.Short() {
		t.Skip("starts Prometheus and three processes")
	}
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	smtpSrv := smtptest.Start(t)
	smtpSrv.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		switch rcpt {
		case "gone@example.com":
			return &smtptest.Fault{Err: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}}
		case "refused@example.com":
			return &smtptest.Fault{AtData: true, Err: &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "refused by policy"}}
		}
		return nil
	})
	env := func() map[string]string {
		return realEnv(redisURL, smtpSrv.URL(), map[string]string{
			"NEWSLETTER_ADMIN_TOKEN":   "prometheus-test-token",
			"NEWSLETTER_DOUBLE_OPTIN":  "false",
			"NEWSLETTER_WELCOME_DELAY": "1s",
		})
	}
	api1 := startService(t, env(), "api")
	api2 := startService(t, env(), "api")
	wrk := startService(t, env(), "worker")

	// Prometheus: the shipped rules as they are, scraping the three
	// processes every second.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), deploy.AlertRulesYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, s := range []*service{api1, api2, wrk} {
		targets = append(targets, strings.TrimPrefix(s.base, "http://"))
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: newsletter\n    static_configs: [{targets: [%s]}]\n",
		filepath.Join(dir, "alerts.yml"), `"`+strings.Join(targets, `", "`)+`"`)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	var promLog logtest.Buffer
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait() // killed: its exit status says nothing
	})
	p := promClient{base: "http://" + promAddr}
	poll.Until(t, poll.BusyMachine, func() error {
		up, err := p.query("sum(up{job=\"newsletter\"})")
		if err != nil {
			return fmt.Errorf("%v\n%s", err, promLog.String())
		}
		if len(up) != 1 || up[0].value() != 3 {
			return fmt.Errorf("targets up: %v", up)
		}
		return nil
	})

	// No digest has run: the alert that watches for that is active
	// (pending: its for is an hour) from the first evaluation on.
	poll.Until(t, poll.BusyMachine, func() error { return p.alertActive("NewsletterNoDigestThisWeek") })

	// One welcome delivered, one bounced, one rejected by policy.
	for _, email := range []string{"fine@example.com", "gone@example.com", "refused@example.com"} {
		api1.post(t, "/subscribe", `{"email":"`+email+`"}`, "", http.StatusAccepted)
	}
	poll.Until(t, poll.BusyMachine, func() error { return p.alertActive("NewsletterMailsRejected") })
	// The archive alert fires on the rejection, not on the bounce.
	poll.Until(t, poll.BusyMachine, func() error {
		res, err := p.query(`sum by (cause) (increase(newsletter_tasks_archived_total[5m]))`)
		if err != nil {
			return err
		}
		got := map[string]float64{}
		for _, r := range res {
			got[r.Metric["cause"]] = r.value()
		}
		if got["bounced"] <= 0 || got["rejected"] <= 0 {
			return fmt.Errorf("archived by cause: %v", got)
		}
		return p.alertActive("NewsletterArchiveGrowing", "cause", "rejected")
	})
	if err := p.alertActive("NewsletterArchiveGrowing", "cause", "bounced"); err == nil {
		t.Fatal("NewsletterArchiveGrowing fired on an ordinary bounce")
	}

	// A digest to the one active reader.
	api1.post(t, "/api/items", `{"title":"News","url":"https://example.com/n"}`, "prometheus-test-token", http.StatusCreated)
	api1.post(t, "/api/digest/run", `{"period":"prom-1"}`, "prometheus-test-token", http.StatusAccepted)
	poll.Until(t, poll.BusyMachine, func() error {
		res, err := p.query(`sum(newsletter_emails_sent_total{kind="digest"})`)
		if err != nil || len(res) != 1 || res[0].value() != 1 {
			return fmt.Errorf("digest mails sent: %v %v", res, err)
		}
		return nil
	})

	// Every panel of the dashboard parses and, now that there was
	// traffic of every kind, returns data.
	panels, err := deploy.DashboardPanels()
	if err != nil {
		t.Fatal(err)
	}
	for _, panel := range panels {
		for _, expr := range panel.Exprs {
			poll.Until(t, poll.BusyMachine, func() error {
				res, err := p.query(expr)
				if err != nil {
					return fmt.Errorf("panel %q: %v", panel.Title, err)
				}
				if len(res) == 0 {
					return fmt.Errorf("panel %q (%s) has no data", panel.Title, expr)
				}
				return nil
			})
		}
	}
	// Every alert expression parses (most are rightly empty now).
	rules, err := deploy.AlertRules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if _, err := p.query(r.Expr); err != nil {
			t.Errorf("alert %s: %v", r.Alert, err)
		}
	}

	// The queue panel, exported by both API processes, equals what asynq
	// says: each process reports the same numbers, and max counts them
	// once where sum would count them twice.
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.Until(t, poll.BusyMachine, func() error {
		res, err := p.query(`max by (queue, state) (newsletter_queue_tasks)`)
		if err != nil {
			return err
		}
		exporters, err := p.query(`count by (queue, state) (newsletter_queue_tasks)`)
		if err != nil || len(exporters) == 0 || exporters[0].value() != 2 {
			return fmt.Errorf("exporters per series: %v %v", exporters, err)
		}
		for _, r := range res {
			info, err := insp.GetQueueInfo(r.Metric["queue"])
			want := 0
			if err == nil {
				want = map[string]int{"pending": info.Pending, "scheduled": info.Scheduled, "retry": info.Retry,
					"active": info.Active, "archived": info.Archived, "aggregating": info.Aggregating}[r.Metric["state"]]
			}
			if int(r.value()) != want {
				return fmt.Errorf("%s %s: Prometheus %v, asynq %d", r.Metric["queue"], r.Metric["state"], r.value(), want)
			}
		}
		if len(res) != len(tasks.Queues)*6 {
			return fmt.Errorf("%d queue series, want %d", len(res), len(tasks.Queues)*6)
		}
		return nil
	})
}

// promClient asks Prometheus's HTTP API.
type promClient struct{ base string }

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value() float64 {
	v, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

func (p promClient) get(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

func (p promClient) query(expr string) ([]promSample, error) {
	var data struct {
		Result []promSample `json:"result"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	return data.Result, nil
}

// alertActive is nil when alert is pending or firing, for the label pair
// given (if any).
func (p promClient) alertActive(alert string, label ...string) error {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", &data); err != nil {
		return err
	}
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == alert && (len(label) < 2 || a.Labels[label[0]] == label[1]) {
			return nil
		}
	}
	return fmt.Errorf("alert %s %v is not active (%d alerts active)", alert, label, len(data.Alerts))
}

// post sends a JSON body to the service and wants the status code;
// token, when set, is the admin Bearer token.
func (s *service) post(t *testing.T, path, body, token string, want int) {
	t.Helper()
	req, err := http.NewRequest("POST", s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %s, want %d", path, resp.Status, want)
	}
}
