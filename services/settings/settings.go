// Package settings checks the newsletter's own settings (its name, From,
// postal address, logo and colour: store.Settings) and keeps them in
// every process: a Cache re-reads the stored version every few seconds,
// so a change made in the console reaches the API, the workers and the
// scheduler without a restart. Until anything is saved, the settings are
// derived from the environment (Defaults).
package settings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/store"
)

// The longest values (in characters): a name fits a subject line and a
// page title, a description a paragraph, a postal address a few lines.
const (
	MaxName          = 100
	MaxDescription   = 500
	MaxPostalAddress = 300
	MaxURL           = 2000
	MaxAddress       = 320
	// The page after confirming: a heading, a few short paragraphs.
	MaxConfirmedHeading = 100
	MaxConfirmedText    = 1000
	// MaxTestRecipients is the most addresses of the team's test list.
	MaxTestRecipients = 20
)

// DefaultName names the newsletter when NEWSLETTER_FROM has no display
// name and nothing was saved.
const DefaultName = "Newsletter"

// DefaultRecheck is how often a Cache reads the stored version: a change
// reaches every process within this time.
const DefaultRecheck = 5 * time.Second

// ErrNoPostalAddress refuses a bulk send while no postal address is set
// and NEWSLETTER_REQUIRE_POSTAL_ADDRESS is on.
var ErrNoPostalAddress = errors.New("no postal address is set: bulk mail must carry the sender's postal address (CAN-SPAM and others); set one at /admin/settings or PUT /api/settings, or turn NEWSLETTER_REQUIRE_POSTAL_ADDRESS off")

// Defaults are the settings before any are saved: NEWSLETTER_FROM, and
// its display name as the newsletter's name.
func Defaults(from string) store.Settings {
	s := store.Settings{Name: DefaultName, From: from, TestRecipients: []string{}}
	if a, err := mail.ParseAddress(from); err == nil && strings.TrimSpace(a.Name) != "" {
		s.Name = strings.TrimSpace(a.Name)
	}
	return s
}

// Error is settings refused: the first field that is wrong and why.
type Error struct {
	Field, Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

var accentPattern = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// Check refuses settings a reader or a mailbox provider must not see:
// control characters (a header or a page broken open), a From that the
// DKIM key of dkimDomain does not align with ("" : no DKIM, any
// address), a colour other than #rrggbb, a logo not on https, values
// over their length. Text is trimmed in place.
func Check(s *store.Settings, dkimDomain string) error {
	for _, f := range []struct {
		name string
		v    *string
		max  int
		// lines: line breaks allowed (the postal address has lines).
		lines bool
	}{
		{"name", &s.Name, MaxName, false},
		{"description", &s.Description, MaxDescription, true},
		{"postal_address", &s.PostalAddress, MaxPostalAddress, true},
		{"from", &s.From, MaxAddress, false},
		{"reply_to", &s.ReplyTo, MaxAddress, false},
		{"logo_url", &s.LogoURL, MaxURL, false},
		{"accent", &s.Accent, 7, false},
		{"confirmed_heading", &s.ConfirmedHeading, MaxConfirmedHeading, false},
		{"confirmed_text", &s.ConfirmedText, MaxConfirmedText, true},
		{"confirmed_url", &s.ConfirmedURL, MaxURL, false},
	} {
		*f.v = strings.TrimSpace(strings.ReplaceAll(*f.v, "\r\n", "\n"))
		if !utf8.ValidString(*f.v) {
			return &Error{f.name, "not valid UTF-8"}
		}
		if n := utf8.RuneCountInString(*f.v); n > f.max {
			return &Error{f.name, fmt.Sprintf("at most %d characters, got %d", f.max, n)}
		}
		for _, r := range *f.v {
			if unicode.Is(unicode.Cc, r) && !(f.lines && r == '\n') {
				return &Error{f.name, "no control characters"}
			}
		}
	}
	if s.Name == "" {
		return &Error{"name", "required"}
	}
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return &Error{"from", `an address such as "Newsletter <news@example.com>"`}
	}
	if dkimDomain != "" && !address.DKIMAligned(dkimDomain, address.Domain(from.Address)) {
		return &Error{"from", fmt.Sprintf("an address at %s or below it (NEWSLETTER_DKIM_DOMAIN): mail is signed for that domain, and DMARC fails a From it does not align with", dkimDomain)}
	}
	if s.ReplyTo != "" {
		if _, err := mail.ParseAddress(s.ReplyTo); err != nil {
			return &Error{"reply_to", "an address such as editor@example.com, or empty"}
		}
	}
	if s.LogoURL != "" {
		u, err := url.Parse(s.LogoURL)
		switch {
		case err == nil && u.Scheme == "http" && u.Host != "":
			return &Error{"logo_url", "an https:// address: mail clients block images over plain http. Put the image where https serves it (your website, the archive's host, an image host) and paste that address, or leave it empty"}
		case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
			return &Error{"logo_url", "the https:// address of an image, e.g. https://example.com/logo.png (the address the image opens at in a browser), or empty"}
		}
	}
	if s.Accent != "" && !accentPattern.MatchString(s.Accent) {
		return &Error{"accent", "a colour as #rrggbb, or empty"}
	}
	s.Accent = strings.ToLower(s.Accent)
	if s.ConfirmedURL != "" {
		u, err := url.Parse(s.ConfirmedURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return &Error{"confirmed_url", "an http:// or https:// URL to lead readers to after confirming, or empty (the archive)"}
		}
	}
	return checkTestRecipients(s)
}

// checkTestRecipients normalises the team's test list in place: each
// address once, at most MaxTestRecipients.
func checkTestRecipients(s *store.Settings) error {
	out := make([]string, 0, len(s.TestRecipients))
	for _, a := range s.TestRecipients {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		n, err := address.Normalize(a)
		if err != nil {
			return &Error{"test_recipients", fmt.Sprintf("%q: %v", a, err)}
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) > MaxTestRecipients {
		return &Error{"test_recipients", fmt.Sprintf("at most %d addresses, got %d", MaxTestRecipients, len(out))}
	}
	s.TestRecipients = out
	return nil
}

// Cache keeps the settings in a process. Current reads the stored
// version at most every Recheck (one request at a time; the others go on
// with the settings they have) and the settings whole only when it
// moved: serving them costs one small read per interval, not one per
// mail or page.
type Cache struct {
	store    store.SettingsStore
	defaults store.Settings
	recheck  time.Duration
	now      func() time.Time
	log      *slog.Logger
	// RequirePostal is NEWSLETTER_REQUIRE_POSTAL_ADDRESS.
	requirePostal bool

	mu      sync.Mutex
	cur     store.Settings
	known   bool
	checked time.Time
	reading bool
}

// Options configure a Cache.
type Options struct {
	// Defaults are the settings while none are saved (Defaults(from)).
	Defaults store.Settings
	// Recheck is how often the version is read (DefaultRecheck).
	Recheck time.Duration
	// RequirePostal refuses bulk sends without a postal address
	// (NEWSLETTER_REQUIRE_POSTAL_ADDRESS).
	RequirePostal bool
	Now           func() time.Time
	Log           *slog.Logger
}

// NewCache keeps st's settings.
func NewCache(st store.SettingsStore, o Options) *Cache {
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Defaults.Name == "" {
		o.Defaults.Name = DefaultName
	}
	return &Cache{store: st, defaults: o.Defaults, recheck: o.Recheck, now: o.Now, log: o.Log, requirePostal: o.RequirePostal, cur: o.Defaults}
}

// Fixed is a Cache that never reads a store: s always (tests, previews).
func Fixed(s store.Settings) *Cache {
	c := NewCache(nil, Options{Defaults: s})
	c.known = true
	return c
}

// Defaults are the settings while none are saved.
func (c *Cache) Defaults() store.Settings { return c.defaults }

// RequiresPostal reports NEWSLETTER_REQUIRE_POSTAL_ADDRESS.
func (c *Cache) RequiresPostal() bool { return c.requirePostal }

// Current are the settings in effect. A store that fails keeps the ones
// in hand (logged): stale settings are better than no mail; before the
// first read they are the defaults.
func (c *Cache) Current(ctx context.Context) store.Settings {
	if c == nil {
		return Defaults("")
	}
	c.mu.Lock()
	due := c.store != nil && (!c.known || c.now().Sub(c.checked) >= c.recheck) && !c.reading
	cur := c.cur
	if !due {
		c.mu.Unlock()
		return cur
	}
	c.reading = true
	c.mu.Unlock()
	next, err := c.read(ctx, cur)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	c.checked = c.now()
	if err != nil {
		c.log.Warn("settings: read the stored settings, keeping those in hand", "err", err)
		return c.cur
	}
	// A Set while this read was out may be newer: the higher version wins.
	if next.Version >= c.cur.Version {
		c.cur = next
	}
	c.known = true
	return c.cur
}

// read is the stored settings when their version is not cur's (the
// defaults when none are saved).
func (c *Cache) read(ctx context.Context, cur store.Settings) (store.Settings, error) {
	v, err := c.store.SettingsVersion(ctx)
	if err != nil {
		return cur, err
	}
	if c.known && v == cur.Version {
		return cur, nil
	}
	if v == 0 {
		return c.defaults, nil
	}
	s, err := c.store.Settings(ctx)
	if err != nil {
		return cur, err
	}
	return s, nil
}

// Set puts settings just saved in effect in this process at once (the
// others see them within Recheck).
func (c *Cache) Set(s store.Settings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Version >= c.cur.Version {
		c.cur, c.known, c.checked = s, true, c.now()
	}
}

// BulkReady refuses a bulk send (an issue, a digest) while no postal
// address is set and one is required: ErrNoPostalAddress.
func (c *Cache) BulkReady(ctx context.Context) error {
	if c == nil || !c.requirePostal {
		return nil
	}
	if strings.TrimSpace(c.Current(ctx).PostalAddress) == "" {
		return ErrNoPostalAddress
	}
	return nil
}
