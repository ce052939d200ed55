package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/services/engage"
)

// The engagement settings: aggregate and no opens by default, the three
// modes, days, on/off opens, scanner networks as CIDRs or addresses, and
// one clear line for each bad value.
func TestEngagementSettings(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Engagement != engage.Aggregate || c.EngagementDays != 90 || c.Opens || c.ScannerNets != nil {
		t.Fatalf("defaults: %q %d %v %v", c.Engagement, c.EngagementDays, c.Opens, c.ScannerNets)
	}
	c, err = Load(env(map[string]string{"NEWSLETTER_ENGAGEMENT": "per-person", "NEWSLETTER_ENGAGEMENT_DAYS": "30",
		"NEWSLETTER_OPENS": "on", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS": "192.0.2.0/24, 2001:db8::1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::1/128")}
	if c.Engagement != engage.PerPerson || c.EngagementDays != 30 || !c.Opens || len(c.ScannerNets) != 2 || c.ScannerNets[0] != want[0] || c.ScannerNets[1] != want[1] {
		t.Fatalf("set: %q %d %v %v", c.Engagement, c.EngagementDays, c.Opens, c.ScannerNets)
	}
	_, err = Load(env(map[string]string{"NEWSLETTER_ENGAGEMENT": "everything", "NEWSLETTER_ENGAGEMENT_DAYS": "0",
		"NEWSLETTER_OPENS": "maybe", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS": "10.0.0.0/33"}))
	if err == nil {
		t.Fatal("bad engagement settings accepted")
	}
	for _, name := range []string{"NEWSLETTER_ENGAGEMENT:", "NEWSLETTER_ENGAGEMENT_DAYS:", "NEWSLETTER_OPENS:", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS:"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("no line for %s in:\n%s", name, err)
		}
	}
}
