package deploy

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// The alert rules and the dashboard, as shipped. Tests read them here:
// the file checks of this package and the run against a real Prometheus
// in cmd/newsletter.
var (
	//go:embed prometheus/alerts.yml
	AlertRulesYAML []byte
	//go:embed grafana/dashboards/newsletter.json
	DashboardJSON []byte
)

// Rule is one alert rule.
type Rule struct {
	Alert string `yaml:"alert"`
	Expr  string `yaml:"expr"`
}

// AlertRules are the rules of alerts.yml, in order.
func AlertRules() ([]Rule, error) {
	var f struct {
		Groups []struct {
			Rules []Rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(AlertRulesYAML, &f); err != nil {
		return nil, fmt.Errorf("alerts.yml: %w", err)
	}
	var out []Rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// Panel is one dashboard panel's title and query expressions.
type Panel struct {
	Title string
	Exprs []string
}

// DashboardPanels are the panels of the dashboard, in order.
func DashboardPanels() ([]Panel, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(DashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("newsletter.json: %w", err)
	}
	out := make([]Panel, len(d.Panels))
	for i, p := range d.Panels {
		out[i].Title = p.Title
		for _, tg := range p.Targets {
			out[i].Exprs = append(out[i].Exprs, tg.Expr)
		}
	}
	return out, nil
}
