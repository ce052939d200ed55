package settings

import (
	"context"
	"strings"

	"github.com/newsletter/newsletter/store"
)

// Save checks next, saves it over the version the writer read
// and puts it in effect in cache: the API's PUT and the console's form
// share it. A *Error or store.ErrSettingsStale leaves everything
// as it was.
func Save(ctx context.Context, st store.SettingsStore, cache *Cache, dkimDomain string, cur, next store.Settings, version int64) (store.Settings, error) {
	if err := Check(&next, dkimDomain); err != nil {
		return cur, err
	}
	saved, err := st.SaveSettings(ctx, next, version)
	if err != nil {
		return cur, err
	}
	cache.Set(saved)
	return saved, nil
}

// Changed names the fields that differ between a and b, for the
// audit log (the values may be personal: a postal address).
func Changed(a, b store.Settings) string {
	var out []string
	for _, f := range []struct {
		name string
		a, b string
	}{{"name", a.Name, b.Name}, {"description", a.Description, b.Description}, {"from", a.From, b.From},
		{"reply_to", a.ReplyTo, b.ReplyTo}, {"postal_address", a.PostalAddress, b.PostalAddress},
		{"logo_url", a.LogoURL, b.LogoURL}, {"accent", a.Accent, b.Accent},
		{"confirmed_heading", a.ConfirmedHeading, b.ConfirmedHeading}, {"confirmed_text", a.ConfirmedText, b.ConfirmedText},
		{"confirmed_url", a.ConfirmedURL, b.ConfirmedURL},
		{"test_recipients", strings.Join(a.TestRecipients, ","), strings.Join(b.TestRecipients, ",")}} {
		if f.a != f.b {
			out = append(out, f.name)
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
