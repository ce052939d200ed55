package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/queuemetrics"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       map[string]string `yaml:"build"`
		Command     []string          `yaml:"command"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

var defaultVar = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

func TestCompose(t *testing.T) {
	var c compose
	readYAML(t, "../docker-compose.yml", &c)
	for _, name := range []string{"redis", "newsletter", "mailpit", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("service %s missing", name)
		}
	}
	redis := c.Services["redis"]
	if !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") || len(redis.Volumes) == 0 || !strings.HasSuffix(redis.Volumes[0], ":/data") {
		t.Fatalf("redis must keep an append-only file on a volume: %+v", redis)
	}
	if _, ok := c.Volumes[strings.Split(redis.Volumes[0], ":")[0]]; !ok {
		t.Fatal("redis volume not declared")
	}
	ports := map[string][]string{"newsletter": {"8080:8080"}, "mailpit": {"1025:1025", "8025:8025"}, "prometheus": {"9090:9090"}, "grafana": {"3000:3000"}}
	for svc, want := range ports {
		for _, p := range want {
			// Bound to this machine: a laptop on a café's network does not
			// publish the admin token's service to it.
			if !slices.Contains(c.Services[svc].Ports, "127.0.0.1:"+p) {
				t.Errorf("%s does not publish %s on 127.0.0.1 only: %v", svc, p, c.Services[svc].Ports)
			}
		}
	}
	for name, svc := range c.Services {
		if name == "newsletter" {
			continue // built here
		}
		if _, tag, ok := strings.Cut(svc.Image, ":"); !ok || tag == "" || tag == "latest" {
			t.Errorf("%s's image %q is not pinned to a version", name, svc.Image)
		}
	}
	nl := c.Services["newsletter"]
	if nl.Build["dockerfile"] != "deploy/Dockerfile" {
		t.Fatalf("newsletter is not built from deploy/Dockerfile: %v", nl.Build)
	}
	env := map[string]string{}
	for k, v := range nl.Environment {
		env[k] = defaultVar.ReplaceAllString(v, "$1")
	}
	if env["NEWSLETTER_SMTP_URL"] != "smtp://mailpit:1025?tls=none" || env["NEWSLETTER_REDIS_URL"] != "redis://redis:6379/0" {
		t.Fatalf("the service must reach compose's Redis and Mailpit: %v", env)
	}
	// That this environment starts the service is cmd/newsletter's
	// TestConfigComposeEnvironment: the settings are read there.
	for _, svc := range []string{"prometheus", "grafana"} {
		for _, v := range c.Services[svc].Volumes {
			src := strings.Split(v, ":")[0]
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("%s mounts %s, which does not exist", svc, src)
			}
		}
	}
}

// exportedMetrics are the names our code registers.
func exportedMetrics(t *testing.T) map[string]bool {
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	h := api.NewMetrics(reg)
	// Touch every vector so it shows up in Gather.
	m.Tasks.WithLabelValues("l", "t", "q", "success").Inc()
	m.TaskDuration.WithLabelValues("l", "t", "q").Observe(1)
	m.Sent.WithLabelValues("k").Inc()
	m.Failed.WithLabelValues("k", "r").Inc()
	m.Archived.WithLabelValues("l", "t", "q", "c").Inc()
	m.Bounces.WithLabelValues("hard", "smtp").Inc()
	m.Complaints.WithLabelValues("smtp").Inc()
	m.Steps.WithLabelValues("welcome", "sent").Inc()
	m.TransportPaused.WithLabelValues("email").Set(1)
	h.Requests.WithLabelValues("r", "200").Inc()
	h.Duration.WithLabelValues("r").Observe(1)
	rdb, _ := redistest.New(t, redistest.DBDeploy)
	st := store.NewRedis(rdb)
	if _, err := st.AddItem(context.Background(), store.Item{Title: "t", URL: "https://x.io"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.StartDigestRun(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	audit.NewTrail(st, logredact.New(nil), slog.Default(), reg)
	reg.MustRegister(api.DigestCollector{Store: st}, queuemetrics.Collector{Inspector: emptyQueues{}, Queues: tasks.Queues, LaneOf: tasks.LaneOf})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			names[f.GetName()+"_bucket"] = true
		}
	}
	return names
}

// emptyQueues is an Inspector whose queues were never used.
type emptyQueues struct{}

func (emptyQueues) GetQueueInfo(string) (*asynq.QueueInfo, error) { return nil, asynq.ErrQueueNotFound }

var metricName = regexp.MustCompile(`\b(newsletter_[a-z_]+|asynq_[a-z_]+)`)

// asynqMetrics are exported by asynq/x/metrics.
var asynqMetrics = map[string]bool{"asynq_queue_size": true, "asynq_queue_latency_seconds": true, "asynq_tasks_enqueued_total": true}

func checkMetricNames(t *testing.T, where, expr string, ours map[string]bool) {
	t.Helper()
	for _, n := range metricName.FindAllString(expr, -1) {
		if !ours[n] && !asynqMetrics[n] {
			t.Errorf("%s uses %s, which nothing exports", where, n)
		}
	}
}

func TestPrometheusAndAlerts(t *testing.T) {
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "prometheus/prometheus.yml", &prom)
	if len(prom.ScrapeConfigs) == 0 || prom.ScrapeConfigs[0].StaticConfigs[0].Targets[0] != "newsletter:8080" {
		t.Fatalf("prometheus does not scrape the compose service: %+v", prom)
	}
	rules, err := AlertRules()
	if err != nil {
		t.Fatal(err)
	}
	ours := exportedMetrics(t)
	got := map[string]bool{}
	for _, r := range rules {
		got[r.Alert] = true
		checkMetricNames(t, "alert "+r.Alert, r.Expr, ours)
	}
	for _, want := range []string{"NewsletterDown", "NewsletterWorkersNotProcessing", "NewsletterQueueLatencyHigh", "NewsletterArchiveGrowing", "NewsletterBounceRateHigh", "NewsletterMailsRejected", "NewsletterNoDigestThisWeek", "NewsletterComplaintRateHigh", "NewsletterTransportPaused", "NewsletterLanePendingHigh", "NewsletterLaneOldestPendingHigh", "NewsletterAuditWriteFailed", "NewsletterSMSCapReached"} {
		if !got[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	panels, err := DashboardPanels()
	if err != nil {
		t.Fatal(err)
	}
	ours := exportedMetrics(t)
	var all strings.Builder
	for _, p := range panels {
		for _, expr := range p.Exprs {
			checkMetricNames(t, "panel "+p.Title, expr, ours)
			all.WriteString(expr + "\n")
		}
	}
	for _, want := range []string{"newsletter_queue_tasks", "newsletter_tasks_archived_total", "asynq_queue_latency_seconds", "newsletter_emails_sent_total", "newsletter_emails_failed_total", "newsletter_task_duration_seconds_bucket", "newsletter_http_requests_total", "newsletter_bounces_total", "newsletter_complaints_total", "newsletter_sequence_steps_total", "newsletter_lane_pending", "newsletter_lane_oldest_pending_seconds"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no panel shows %s", want)
		}
	}
}

func TestKubernetesManifests(t *testing.T) {
	f, err := os.ReadFile("k8s/newsletter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(f))
	var shutdown time.Duration
	roles := map[string]bool{}
	// laneOf is the lane each worker Deployment serves (its --lanes).
	laneOf := map[string]string{}
	var scaled []scaledObject
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch doc["kind"] {
		case "ConfigMap":
			shutdown, _ = time.ParseDuration(doc["data"].(map[string]any)["NEWSLETTER_SHUTDOWN_TIMEOUT"].(string))
		case "Deployment":
			name := doc["metadata"].(map[string]any)["name"].(string)
			spec := doc["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			grace := time.Duration(spec["terminationGracePeriodSeconds"].(int)) * time.Second
			c := spec["containers"].([]any)[0].(map[string]any)
			var args []string
			for _, a := range c["args"].([]any) {
				args = append(args, a.(string))
			}
			role := args[0]
			roles[role] = true
			if role == "worker" {
				if len(args) != 3 || args[1] != "--lanes" {
					t.Errorf("%s: args %v, want worker --lanes <lane>", name, args)
				} else if lanes, err := tasks.ParseLanes(args[2]); err != nil || len(lanes) != 1 {
					t.Errorf("%s: --lanes %s: %v, want one lane per Deployment", name, args[2], err)
				} else {
					laneOf[name] = lanes[0]
				}
			}
			if grace <= shutdown {
				t.Errorf("%s: terminationGracePeriodSeconds %s is not above NEWSLETTER_SHUTDOWN_TIMEOUT %s", role, grace, shutdown)
			}
			if c["readinessProbe"] == nil || c["livenessProbe"] == nil {
				t.Errorf("%s has no probes", role)
			}
			// The kubelet checks runAsNonRoot only against a numeric user.
			pod, _ := spec["securityContext"].(map[string]any)
			if pod["runAsNonRoot"] != true || pod["runAsUser"] != 65532 || fmt.Sprint(pod["seccompProfile"]) != "map[type:RuntimeDefault]" {
				t.Errorf("%s: pod securityContext %v", role, pod)
			}
			sc, _ := c["securityContext"].(map[string]any)
			caps, _ := sc["capabilities"].(map[string]any)
			if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || fmt.Sprint(caps["drop"]) != "[ALL]" {
				t.Errorf("%s: container securityContext %v", role, sc)
			}
		case "ScaledObject":
			b, _ := yaml.Marshal(doc)
			var so scaledObject
			if err := yaml.Unmarshal(b, &so); err != nil {
				t.Fatal(err)
			}
			scaled = append(scaled, so)
		}
	}
	if shutdown == 0 || !roles["api"] || !roles["worker"] || !roles["scheduler"] {
		t.Fatalf("manifests: shutdown %s, roles %v", shutdown, roles)
	}
	// Every lane has its worker Deployment and a ScaledObject on that
	// Deployment scaling on the lane's pending depth and on the age of
	// its oldest pending task: metrics that exist, for that lane only.
	ours := exportedMetrics(t)
	byLane := map[string]bool{}
	for _, so := range scaled {
		lane, ok := laneOf[so.Spec.ScaleTargetRef.Name]
		if !ok {
			t.Errorf("ScaledObject %s scales %q, which is no worker Deployment of one lane", so.Metadata.Name, so.Spec.ScaleTargetRef.Name)
			continue
		}
		byLane[lane] = true
		want := map[string]bool{
			`max(newsletter_lane_pending{lane="` + lane + `"})`:                true,
			`max(newsletter_lane_oldest_pending_seconds{lane="` + lane + `"})`: true,
		}
		for _, tr := range so.Spec.Triggers {
			q := tr.Metadata["query"]
			checkMetricNames(t, "ScaledObject "+so.Metadata.Name, q, ours)
			if tr.Type != "prometheus" || !want[q] {
				t.Errorf("ScaledObject %s: trigger %s %q, want one of %v", so.Metadata.Name, tr.Type, q, want)
			}
			if n, err := strconv.Atoi(tr.Metadata["threshold"]); err != nil || n <= 0 {
				t.Errorf("ScaledObject %s: threshold %q", so.Metadata.Name, tr.Metadata["threshold"])
			}
			// The age is not divided among the pods (AverageValue would
			// read 60 s as 60 pods' worth of work).
			if strings.Contains(q, "oldest") && tr.MetricType != "Value" {
				t.Errorf("ScaledObject %s: the age trigger's metricType is %q, want Value", so.Metadata.Name, tr.MetricType)
			}
			delete(want, q)
		}
		if len(want) != 0 {
			t.Errorf("ScaledObject %s (lane %s) does not scale on %v", so.Metadata.Name, lane, want)
		}
	}
	for _, lane := range tasks.Lanes {
		if !byLane[lane] {
			t.Errorf("lane %s has no worker Deployment with a ScaledObject", lane)
		}
	}
}

// scaledObject is what the test reads of a KEDA ScaledObject.
type scaledObject struct {
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ScaleTargetRef struct {
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		Triggers []struct {
			Type       string            `yaml:"type"`
			MetricType string            `yaml:"metricType"`
			Metadata   map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

func TestDockerfileAndMake(t *testing.T) {
	b, _ := os.ReadFile("Dockerfile")
	df := string(b)
	if strings.Count(df, "\nFROM ") < 1 || !strings.Contains(df, "AS build") || !strings.Contains(df, "CGO_ENABLED=0") ||
		!strings.Contains(df, "USER 65532:65532") || !strings.Contains(df, "HEALTHCHECK") {
		t.Fatalf("Dockerfile must be multi-stage, static, non-root, with a health check:\n%s", df)
	}
	mk, _ := os.ReadFile("../Makefile")
	for _, target := range []string{"up:", "down:", "logs:", "e2e:"} {
		if !strings.Contains(string(mk), "\n"+target) {
			t.Errorf("Makefile has no %s target", strings.TrimSuffix(target, ":"))
		}
	}
}

// TestPromtool runs Prometheus' own checker on the config and the alert
// rules when it is installed (Debian's prometheus package; CI installs it).
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	dir := t.TempDir()
	cfg, _ := os.ReadFile("prometheus/prometheus.yml")
	rules, _ := os.ReadFile("prometheus/alerts.yml")
	os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644)
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), bytes.ReplaceAll(cfg, []byte("/etc/prometheus/alerts.yml"), []byte(filepath.Join(dir, "alerts.yml"))), 0o644)
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yml"},
		// The alerts' unit tests (alerts_test.yml).
		{"test", "rules", "prometheus/alerts_test.yml"},
		{"check", "config", filepath.Join(dir, "prometheus.yml")},
		// As shipped, with the rule file at its path in the container.
		{"check", "config", "--syntax-only", "prometheus/prometheus.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
