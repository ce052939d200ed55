package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Settings are the newsletter's own: who it is to its readers (name,
// description, logo, accent colour), who its mail is from, and the
// postal address its bulk mail must carry. The store keeps what the
// settings package checked; Version counts the saves (0: never saved).
type Settings struct {
	Name          string `json:"name"`
	Description   string `json:"description"`
	From          string `json:"from"`
	ReplyTo       string `json:"reply_to"`
	PostalAddress string `json:"postal_address"`
	LogoURL       string `json:"logo_url"`
	Accent        string `json:"accent"`
	// ConfirmedHeading and ConfirmedText are the page a reader sees
	// after confirming ("": the built-in words); ConfirmedURL is where
	// it leads them ("": the archive, when it is served).
	ConfirmedHeading string `json:"confirmed_heading"`
	ConfirmedText    string `json:"confirmed_text"`
	ConfirmedURL     string `json:"confirmed_url"`
	// TestRecipients are the team's addresses a test send may reach
	// besides NEWSLETTER_TEST_RECIPIENTS, normalised.
	TestRecipients []string `json:"test_recipients"`
	Version        int64    `json:"version"`
}

// ErrSettingsStale is a save over settings that changed since the writer
// read them: nothing was written.
var ErrSettingsStale = errors.New("the settings changed since you read them; read them again")

// SettingsStore keeps the settings.
type SettingsStore interface {
	// Settings are the saved settings, or the zero Settings (Version 0)
	// when none were ever saved.
	Settings(ctx context.Context) (Settings, error)
	// SettingsVersion is the saved settings' version (0: none): one
	// small read, for the caches of every role.
	SettingsVersion(ctx context.Context) (int64, error)
	// SaveSettings writes s when the saved version is still version (0:
	// none saved yet) and answers them with their new version;
	// ErrSettingsStale otherwise, nothing written.
	SaveSettings(ctx context.Context, s Settings, version int64) (Settings, error)
}

// settingsValues are s's fields in the order saveSettingsScript takes
// them in ARGV (its names list).
func settingsValues(s Settings) []string {
	return []string{s.Name, s.Description, s.From, s.ReplyTo, s.PostalAddress, s.LogoURL, s.Accent,
		s.ConfirmedHeading, s.ConfirmedText, s.ConfirmedURL, strings.Join(s.TestRecipients, "\n")}
}

// Settings implements SettingsStore.
func (r *Redis) Settings(ctx context.Context) (Settings, error) {
	h, err := r.rdb.HGetAll(ctx, keySettings).Result()
	if err != nil {
		return Settings{}, err
	}
	if len(h) == 0 {
		return Settings{}, nil
	}
	v, err := strconv.ParseInt(h["v"], 10, 64)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: bad version %q", h["v"])
	}
	out := Settings{Name: h["name"], Description: h["description"], From: h["from"], ReplyTo: h["reply_to"],
		PostalAddress: h["postal_address"], LogoURL: h["logo_url"], Accent: h["accent"],
		ConfirmedHeading: h["confirmed_heading"], ConfirmedText: h["confirmed_text"], ConfirmedURL: h["confirmed_url"], Version: v}
	// The addresses are kept one a line (settingsValues): an address
	// checked by the settings has no line break. None is an empty list
	// (a JSON [], not null).
	out.TestRecipients = []string{}
	if t := h["test_recipients"]; t != "" {
		out.TestRecipients = strings.Split(t, "\n")
	}
	return out, nil
}

// SettingsVersion implements SettingsStore.
func (r *Redis) SettingsVersion(ctx context.Context) (int64, error) {
	v, err := r.rdb.HGet(ctx, keySettings, "v").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// saveSettingsScript writes the settings whole when their version is the
// one the writer read: a save never mixes two writers' fields, and a
// second writer who read the same version is refused.
//
//	KEYS[1] keySettings
//	ARGV[1] the version the writer read (0: none saved)
//	ARGV[2..] the values of settingsFields, in order
//
// Returns the new version, or -1 when the saved one is another.
var saveSettingsScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if cur ~= tonumber(ARGV[1]) then return -1 end
local names = {'name', 'description', 'from', 'reply_to', 'postal_address', 'logo_url', 'accent',
  'confirmed_heading', 'confirmed_text', 'confirmed_url', 'test_recipients'}
for i, f in ipairs(names) do redis.call('HSET', KEYS[1], f, ARGV[i + 1]) end
return redis.call('HINCRBY', KEYS[1], 'v', 1)
`)

// SaveSettings implements SettingsStore.
func (r *Redis) SaveSettings(ctx context.Context, s Settings, version int64) (Settings, error) {
	args := []any{version}
	for _, v := range settingsValues(s) {
		args = append(args, v)
	}
	n, err := saveSettingsScript.Run(ctx, r.rdb, []string{keySettings}, args...).Int64()
	if err != nil {
		return Settings{}, err
	}
	if n < 0 {
		return Settings{}, ErrSettingsStale
	}
	s.Version = n
	return s, nil
}
