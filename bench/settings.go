package bench

import (
	"context"
	"fmt"

	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// Settings are the newsletter's settings a benchmark saves before its
// first send. Outside embedded mode bulk mail must carry a postal address
// (NEWSLETTER_REQUIRE_POSTAL_ADDRESS, on by default), and a benchmark
// starts on an empty Redis: without them every digest and issue is
// refused. The From is the one the DKIM runs sign for (example.com).
var Settings = store.Settings{
	Name: "Bench Weekly", From: "News <news@example.com>",
	PostalAddress: "1 Loopback Lane, 12345 Benchtown",
}

// SaveSettings saves Settings as an operator does at /admin/settings or
// with PUT /api/settings: checked by the same rules, then stored (the
// first save on a fresh Redis). It says so on stdout, so whoever reads
// the figures knows the mails carried the address.
func SaveSettings(ctx context.Context, st store.SettingsStore, where string) error {
	s := Settings
	if err := settings.Check(&s, ""); err != nil {
		return fmt.Errorf("the benchmark's settings: %w", err)
	}
	if _, err := st.SaveSettings(ctx, s, 0); err != nil {
		return fmt.Errorf("save the settings on %s: %w", where, err)
	}
	fmt.Printf("settings saved on %s: postal address %q (bulk mail must carry one; an operator sets it at /admin/settings)\n", where, s.PostalAddress)
	return nil
}
