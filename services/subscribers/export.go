package subscribers

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/store"
)

// PersonalExport is the export's JSON: everything held about one person,
// their browsers and app installs masked (maskedBrowsers, maskedDevices):
// the export says which exist, and hands out no key to notify them.
type PersonalExport struct {
	ExportedAt time.Time `json:"exported_at"`
	store.PersonalData
	// Push and Devices stand in for PersonalData's, which hold the
	// secrets (the outer field is the one JSON writes).
	Push    []browserExport `json:"push_subscriptions"`
	Devices []deviceExport  `json:"devices"`
	// ChannelData is what the channels added through the seam keep of
	// the person, by channel ("channels" is PersonalData's: their choice
	// of channels by topic).
	ChannelData map[string]any `json:"channel_data,omitempty"`
}

// browserExport is a browser as an export shows it: its push service and
// the ends of its endpoint and keys, enough to tell it from another.
type browserExport struct {
	Service   string    `json:"service"`
	Endpoint  string    `json:"endpoint"`
	P256DH    string    `json:"p256dh"`
	Auth      string    `json:"auth"`
	CreatedAt time.Time `json:"created_at"`
}

// deviceExport is an app install as an export shows it.
type deviceExport struct {
	ID        string    `json:"id"`
	Platform  string    `json:"platform"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

func maskedBrowsers(ps []store.PushSubscription) []browserExport {
	out := make([]browserExport, len(ps))
	enc := base64.RawURLEncoding
	for i, p := range ps {
		service := ""
		if u, err := url.Parse(p.Endpoint); err == nil {
			service = u.Host
		}
		out[i] = browserExport{Service: service, Endpoint: maskSecret(p.Endpoint), P256DH: maskSecret(enc.EncodeToString(p.P256DH)),
			Auth: maskSecret(enc.EncodeToString(p.Auth)), CreatedAt: p.CreatedAt}
	}
	return out
}

func maskedDevices(ds []store.Device) []deviceExport {
	out := make([]deviceExport, len(ds))
	for i, d := range ds {
		out[i] = deviceExport{ID: d.ID, Platform: d.Platform, Token: maskSecret(d.Token), CreatedAt: d.CreatedAt}
	}
	return out
}

// maskSecret shows a secret (a device token, a push endpoint or key) by
// its first and last four characters: enough to tell two apart, or to
// match one against the phone or browser it came from, and of no use to
// notify it. A secret too short to keep most of it hidden shows nothing.
func maskSecret(s string) string {
	const shown = 4
	if len(s) < 4*shown {
		return "…"
	}
	return s[:shown] + "…" + s[len(s)-shown:]
}

// WriteExport answers the export, as a file named filename to save when
// filename is not "" (the console's export answers through it too).
func WriteExport(w http.ResponseWriter, pd PersonalExport, filename string) {
	// Personal data: no cache along the way may keep a copy.
	w.Header().Set("Cache-Control", "no-store")
	if filename != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	}
	webjson.Write(w, http.StatusOK, pd)
}

// ExportOf is pd as its owner's export shows it, stamped at: the secrets
// of their browsers and app installs masked.
func ExportOf(pd store.PersonalData, at time.Time) PersonalExport {
	return PersonalExport{ExportedAt: at.UTC(), PersonalData: pd, Push: maskedBrowsers(pd.Push), Devices: maskedDevices(pd.Devices)}
}
