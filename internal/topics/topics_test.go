package topics

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadTheSpecFormat(t *testing.T) {
	s, err := Load("testdata/topics.yaml", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.IDs(), ","); got != "digest,updates,research" {
		t.Fatalf("ids %s", got)
	}
	if got := strings.Join(s.Defaults(), ","); got != "digest,updates" {
		t.Fatalf("defaults %s", got)
	}
	if s.Sequence.Topic != Digest || len(s.Sequence.Steps) != 3 || s.Sequence.Steps[1] != (Step{Template: "getting-started", After: 72 * time.Hour}) {
		t.Fatalf("sequence %+v", s.Sequence)
	}
	if r, _ := s.Topic("research"); r.Description != "Long reads, once a month." || r.Default {
		t.Fatalf("research %+v", r)
	}
	want := []Feed{
		{Topic: "research", URL: "https://example.org/research/feed.xml", Mode: FeedDigest},
		{Topic: "research", URL: "http://blog.example.net/atom", Mode: FeedDigest},
		{Topic: "research", URL: "https://example.org/research/posts.xml", Mode: FeedEach, MaxPerDay: DefaultFeedMaxPerDay},
		{Topic: "research", URL: "https://example.org/research/news.xml", Mode: FeedEach, MaxPerDay: 5},
		{Topic: "research", URL: "https://example.org/research/links.xml", Mode: FeedDigest},
	}
	if got := s.Feeds(); !slices.Equal(got, want) {
		t.Fatalf("feeds %+v\nwant %+v", got, want)
	}
}

func TestBadFeedsNameFileAndLine(t *testing.T) {
	_, err := Load("testdata/bad-feeds.yaml", time.Minute)
	if err == nil {
		t.Fatal("bad feeds accepted")
	}
	want := []string{
		`line 4: topic "digest": feeds: want a list of feed URLs`,
		`line 9: topic "updates": feed "ftp://example.org/feed.xml": want an absolute http(s) URL`,
		`line 10: topic "updates": feed "/feed.xml": want an absolute http(s) URL`,
		`line 11: topic "updates": feed "https://user:xxxxx@example.org/feed.xml": no user or password`,
		`line 12: topic "updates": feed "https://example.org/ok.xml": listed twice`,
		`line 13: topic "updates": feed: want text`,
		`line 14: topic "updates": feed: empty URL`,
		`line 15: topic "updates": feed mode "every": want digest (entries become digest items, the default) or each`,
		`line 17: topic "updates": feed max_per_day "0": want a whole number from 1 to 24`,
		`line 20: topic "updates": feed max_per_day "many": want a whole number from 1 to 24`,
		`line 23: topic "updates": feed max_per_day "25": want a whole number from 1 to 24`,
		`line 25: topic "updates": feed max_per_day: only for mode each`,
		`line 26: topic "updates": feed: missing url`,
		`line 27: topic "updates": feed: unknown field "every" (known: url, mode, max_per_day)`,
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the error repeats a password: %v", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "NEWSLETTER_TOPICS_FILE testdata/bad-feeds.yaml: ") || !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
}

func TestDefaultIsTheWelcomeAlone(t *testing.T) {
	s, err := Load("", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.IDs(), ","); got != "digest,updates" {
		t.Fatalf("ids %s", got)
	}
	if len(s.Sequence.Steps) != 1 || s.Sequence.Steps[0] != (Step{Template: "welcome", After: 90 * time.Second}) || s.Sequence.Topic != Digest {
		t.Fatalf("sequence %+v", s.Sequence)
	}
	// A file without a sequence keeps the built-in one.
	f, err := Parse([]byte("topics:\n- {id: digest, name: D}\n- {id: updates, name: U}\n"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Sequence.Steps) != 1 || f.Sequence.Steps[0].After != time.Minute {
		t.Fatalf("sequence %+v", f.Sequence)
	}
}

func TestBadFileHasOneLinePerMistake(t *testing.T) {
	_, err := Load("testdata/bad.yaml", time.Minute)
	if err == nil {
		t.Fatal("bad file accepted")
	}
	want := []string{
		`line 2: topic id "Digest": use 1 to 32 lower-case letters`,
		`line 2: topics: no topic with id "digest"`,
		`line 4: topic "updates": missing name`,
		`line 5: topic "updates": default: want true or false, got "maybe"`,
		`line 6: topic id "updates": declared twice`,
		`line 8: topic: unknown field "colour"`,
		`line 10: sequence topic "nowhere": not one of the topics`,
		`line 13: step "welcome": after "3d": want a duration such as 5m or 72h (no days: 7 days is 168h)`,
		`line 14: step template "digest": that name is another mail's`,
		`line 16: step template "welcome": used twice`,
		`line 17: step "welcome": after 30m0s: steps must come later than the one before (1h0m0s)`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "NEWSLETTER_TOPICS_FILE testdata/bad.yaml: ") || !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"not yaml":       {"topics: [", "not YAML"},
		"no topics":      {"sequence: {steps: [{template: welcome, after: 1m}]}", "topics: missing"},
		"a list":         {"- a\n- b\n", "want a mapping"},
		"unknown key":    {"topics: [{id: digest, name: D}, {id: updates, name: U}]\nlists: []\n", `unknown field "lists"`},
		"no updates":     {"topics: [{id: digest, name: D}]\n", `no topic with id "updates"`},
		"steps backward": {"topics: [{id: digest, name: D}, {id: updates, name: U}]\nsequence: {steps: [{template: a, after: 2h}, {template: b, after: 1h}]}\n", "must come later"},
		"empty steps":    {"topics: [{id: digest, name: D}, {id: updates, name: U}]\nsequence: {topic: digest, steps: []}\n", "want steps"},
		"missing after":  {"topics: [{id: digest, name: D}, {id: updates, name: U}]\nsequence: {steps: [{template: a}]}\n", "missing after"},
		"bad template":   {"topics: [{id: digest, name: D}, {id: updates, name: U}]\nsequence: {steps: [{template: ../x, after: 1h}]}\n", "lower-case letters"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), time.Minute)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), time.Minute); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCheckNamesUnknownIDs(t *testing.T) {
	s := Default(time.Minute)
	got, err := s.Check([]string{"updates", "digest", "updates"})
	if err != nil || strings.Join(got, ",") != "digest,updates" {
		t.Fatalf("%v %v", got, err)
	}
	_, err = s.Check([]string{"digest", "sports", "x"})
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `"sports", "x"`) {
		t.Fatalf("err %v", err)
	}
}

func TestListIDPerTopic(t *testing.T) {
	s := Default(time.Minute)
	base := "Newsletter <newsletter.example.com>"
	if got := s.ListID("digest", base); got != "Weekly digest <digest.newsletter.example.com>" {
		t.Fatalf("digest: %q", got)
	}
	if got := s.ListID("updates", base); got != "Product updates <updates.newsletter.example.com>" {
		t.Fatalf("updates: %q", got)
	}
	if got := s.ListID("none", base); got != base {
		t.Fatalf("unknown: %q", got)
	}
}

func TestArchiveKeyDefaultsToPublic(t *testing.T) {
	s, err := Parse([]byte("topics:\n- {id: digest, name: D}\n- {id: updates, name: U, archive: true}\n- {id: team, name: T, archive: false}\n"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"digest": true, "updates": true, "team": false, "nowhere": false} {
		if got := s.Public(id); got != want {
			t.Errorf("Public(%q) = %v, want %v", id, got, want)
		}
	}
	if !Default(time.Minute).Public(Digest) {
		t.Error("the built-in digest topic is not public")
	}
	for _, bad := range []string{"maybe", "[x]", "{a: b}"} {
		_, err := Parse([]byte("topics:\n- {id: digest, name: D}\n- {id: updates, name: U}\n- id: team\n  name: T\n  archive: "+bad+"\n"), time.Minute)
		if err == nil || !strings.Contains(err.Error(), `line 6: topic "team": archive: want true or false`) {
			t.Errorf("archive: %s: %v", bad, err)
		}
	}
}

// TestPublicKeyKeepsATopicOffTheSignup: "public: false" makes a topic
// Assigned: not among the signup's topics nor its defaults, refused by
// CheckSignup (ErrNotPublic) while Check still takes it; public is true
// when absent; a value that is not a boolean is refused with its line.
func TestPublicKeyKeepsATopicOffTheSignup(t *testing.T) {
	s, err := Parse([]byte("topics:\n- {id: digest, name: D, default: true}\n- {id: updates, name: U, public: true}\n- {id: insiders, name: I, default: true, public: false}\n"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var signup []string
	for _, tp := range s.Signup() {
		signup = append(signup, tp.ID)
	}
	if strings.Join(signup, ",") != "digest,updates" || strings.Join(s.SignupDefaults(), ",") != "digest" || strings.Join(s.Defaults(), ",") != "digest,insiders" {
		t.Fatalf("signup %v, its defaults %v, defaults %v", signup, s.SignupDefaults(), s.Defaults())
	}
	if _, err := s.CheckSignup([]string{"digest", "insiders"}); !errors.Is(err, ErrNotPublic) || !strings.Contains(err.Error(), `"insiders"`) {
		t.Fatalf("CheckSignup of a non-public topic: %v", err)
	}
	if got, err := s.Check([]string{"insiders"}); err != nil || len(got) != 1 {
		t.Fatalf("Check (the API's, the console's) of a non-public topic: %v %v", got, err)
	}
	_, err = Parse([]byte("topics:\n- {id: digest, name: D}\n- {id: updates, name: U}\n- id: team\n  name: T\n  public: maybe\n"), time.Minute)
	if err == nil || !strings.Contains(err.Error(), `line 6: topic "team": public: want true or false`) {
		t.Errorf("public: maybe: %v", err)
	}
}
