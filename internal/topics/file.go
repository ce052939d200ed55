package topics

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads the topics file at path, or returns the built-in Default
// when path is empty. The error has one line per mistake, each naming the
// file and line.
func Load(path string, welcomeDelay time.Duration) (*Set, error) {
	if path == "" {
		return Default(welcomeDelay), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_TOPICS_FILE: %w", err)
	}
	s, err := Parse(b, welcomeDelay)
	if err != nil {
		return nil, prefixLines("NEWSLETTER_TOPICS_FILE "+path+": ", err)
	}
	return s, nil
}

// reservedTemplates are the mails that are not steps: a step of one of
// these names would share its template and delivery marks.
// The layout and the issue bodies are templates of their own (mailer's
// TemplateNames).
var reservedTemplates = []string{"confirm", "digest", "events", "unsubscribe", "preferences", "issue", "layout", "digest-issue", "post-issue"}

var (
	idPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	templatePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
)

// Parse reads a topics file's content. A file without a sequence gets the
// built-in one (the welcome after welcomeDelay, on the digest topic).
func Parse(b []byte, welcomeDelay time.Duration) (*Set, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	v := &validator{}
	s := &Set{Sequence: defaultSequence(welcomeDelay)}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("line 1: want a mapping with topics and sequence")
	}
	fields := v.mapping(root, "the file", "topics", "sequence")
	if n := fields["topics"]; n == nil {
		v.add(root.Line, "topics: missing; declare at least the %s and %s topics", Digest, Updates)
	} else {
		s.Topics = v.topics(n)
	}
	if n := fields["sequence"]; n != nil {
		s.Sequence = v.sequence(n, s)
	}
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	// The rules of a save in the console or the API too (lengths, control
	// characters): the file is the first import, and a set saved later
	// must pass them.
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// validator collects every mistake instead of stopping at the first, in
// the order of their lines.
type validator struct {
	errs  []error
	lines []int
}

func (v *validator) add(line int, format string, args ...any) {
	at, _ := slices.BinarySearch(v.lines, line+1)
	v.lines = slices.Insert(v.lines, at, line)
	v.errs = slices.Insert(v.errs, at, fmt.Errorf("line %d: "+format, append([]any{line}, args...)...))
}

// mapping returns n's values by key, reporting keys other than allowed.
func (v *validator) mapping(n *yaml.Node, what string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		v.add(n.Line, "%s: want a mapping of %s", what, strings.Join(allowed, ", "))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(allowed, k.Value) {
			v.add(k.Line, "%s: unknown field %q (known: %s)", what, k.Value, strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = n.Content[i+1]
	}
	return out
}

func (v *validator) str(n *yaml.Node, what string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		v.add(n.Line, "%s: want text", what)
		return ""
	}
	return strings.TrimSpace(n.Value)
}

func (v *validator) topics(n *yaml.Node) []Topic {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		v.add(n.Line, "topics: want a list of topics with id, name, description and default")
		return nil
	}
	var out []Topic
	seen := map[string]bool{}
	for _, tn := range n.Content {
		f := v.mapping(tn, "topic", "id", "name", "description", "default", "feeds", "archive", "public")
		t := Topic{ID: v.str(f["id"], "topic id"), Name: v.str(f["name"], "topic name"), Description: v.str(f["description"], "topic description")}
		switch {
		case t.ID == "":
			v.add(tn.Line, "topic: missing id")
		case CheckID(t.ID) != nil:
			v.add(f["id"].Line, "%v", CheckID(t.ID))
		case seen[t.ID]:
			v.add(f["id"].Line, "topic id %q: declared twice", t.ID)
		}
		seen[t.ID] = true
		if t.Name == "" {
			v.add(tn.Line, "topic %q: missing name (shown on the form and in List-Id)", t.ID)
		}
		if d := f["default"]; d != nil {
			if err := d.Decode(&t.Default); err != nil {
				v.add(d.Line, "topic %q: default: want true or false, got %q", t.ID, d.Value)
			}
		}
		if fn := f["feeds"]; fn != nil {
			t.Feeds = v.feeds(fn, t.ID)
		}
		if a := f["archive"]; a != nil {
			public := true
			if err := a.Decode(&public); err != nil || a.Kind != yaml.ScalarNode {
				v.add(a.Line, "topic %q: archive: want true or false (whether its sent issues are in the public archive), got %q", t.ID, a.Value)
			}
			t.Private = !public
		}
		if p := f["public"]; p != nil {
			public := true
			if err := p.Decode(&public); err != nil || p.Kind != yaml.ScalarNode {
				v.add(p.Line, "topic %q: public: want true or false (whether the public signup form offers it), got %q", t.ID, p.Value)
			}
			t.Assigned = !public
		}
		out = append(out, t)
	}
	for _, need := range []string{Digest, Updates} {
		if !seen[need] {
			v.add(n.Line, "topics: no topic with id %q (the %s goes to it)", need, map[string]string{Digest: "weekly digest", Updates: "event notifications"}[need])
		}
	}
	return out
}

// maxFeedURL bounds a feed's address (it names Redis keys and log lines).
const maxFeedURL = 2048

// feeds reads a topic's list of feeds: each a URL (mode digest), or a
// mapping {url, mode, max_per_day}. A URL is absolute http(s), has no
// credentials (they would be logged), and is listed once per topic.
func (v *validator) feeds(n *yaml.Node, topic string) []Feed {
	if n.Kind != yaml.SequenceNode {
		v.add(n.Line, "topic %q: feeds: want a list of feed URLs, e.g. [https://example.com/feed.xml], or of {url, mode, max_per_day}", topic)
		return nil
	}
	var out []Feed
	for _, fn := range n.Content {
		f := Feed{Topic: topic, Mode: FeedDigest}
		un := fn
		if fn.Kind == yaml.MappingNode {
			fields := v.mapping(fn, fmt.Sprintf("topic %q: feed", topic), "url", "mode", "max_per_day")
			if un = fields["url"]; un == nil {
				v.add(fn.Line, "topic %q: feed: missing url", topic)
				continue
			}
			f.Mode, f.MaxPerDay = v.feedMode(fields, topic)
		}
		raw := v.str(un, fmt.Sprintf("topic %q: feed", topic))
		if raw == "" {
			if un.Kind == yaml.ScalarNode {
				v.add(un.Line, "topic %q: feed: empty URL", topic)
			}
			continue
		}
		switch why := checkFeedURL(raw); {
		case why != "":
			if u, err := url.Parse(raw); err == nil && u.User != nil {
				raw = u.Redacted() // the password is not echoed
			}
			v.add(un.Line, "topic %q: feed %q: %s", topic, raw, why)
			continue
		case slices.ContainsFunc(out, func(o Feed) bool { return o.URL == raw }):
			v.add(un.Line, "topic %q: feed %q: listed twice", topic, raw)
			continue
		}
		f.URL = raw
		out = append(out, f)
	}
	return out
}

// feedMode reads a feed mapping's mode and max_per_day: max_per_day is
// for mode each alone (a digest feed's entries wait for the week anyway),
// and defaults there to DefaultFeedMaxPerDay.
func (v *validator) feedMode(fields map[string]*yaml.Node, topic string) (mode string, maxPerDay int) {
	mode = FeedDigest
	if mn := fields["mode"]; mn != nil {
		mode = v.str(mn, fmt.Sprintf("topic %q: feed mode", topic))
		if !slices.Contains(FeedModes, mode) {
			v.add(mn.Line, "topic %q: feed mode %q: want %s (entries become digest items, the default) or %s (each entry an issue of its own)", topic, mode, FeedDigest, FeedEach)
			mode = FeedDigest
		}
	}
	mn := fields["max_per_day"]
	switch {
	case mn != nil && mode != FeedEach:
		v.add(mn.Line, "topic %q: feed max_per_day: only for mode %s (a digest feed's entries wait for the digest)", topic, FeedEach)
	case mn != nil:
		if err := mn.Decode(&maxPerDay); err != nil || mn.Kind != yaml.ScalarNode || maxPerDay < 1 || maxPerDay > MaxFeedMaxPerDay {
			v.add(mn.Line, "topic %q: feed max_per_day %q: want a whole number from 1 to %d (issues a day from this feed)", topic, mn.Value, MaxFeedMaxPerDay)
			maxPerDay = DefaultFeedMaxPerDay
		}
	case mode == FeedEach:
		maxPerDay = DefaultFeedMaxPerDay
	}
	return mode, maxPerDay
}

func (v *validator) sequence(n *yaml.Node, s *Set) Sequence {
	f := v.mapping(n, "sequence", "topic", "steps")
	seq := Sequence{Topic: v.str(f["topic"], "sequence topic")}
	if seq.Topic == "" {
		seq.Topic = Digest
	} else if _, ok := s.Topic(seq.Topic); !ok && len(s.Topics) > 0 {
		v.add(f["topic"].Line, "sequence topic %q: not one of the topics", seq.Topic)
	}
	sn := f["steps"]
	if sn == nil || sn.Kind != yaml.SequenceNode || len(sn.Content) == 0 {
		v.add(n.Line, "sequence: want steps, a list of {template, after}; the first replaces the welcome")
		return seq
	}
	seen := map[string]bool{}
	var last time.Duration = -1
	for _, stn := range sn.Content {
		sf := v.mapping(stn, "step", "template", "after")
		st := Step{Template: v.str(sf["template"], "step template")}
		switch {
		case st.Template == "":
			v.add(stn.Line, "step: missing template")
		case checkStepTemplate(st.Template) != "":
			v.add(sf["template"].Line, "step template %q: %s", st.Template, checkStepTemplate(st.Template))
		case seen[st.Template]:
			v.add(sf["template"].Line, "step template %q: used twice (each step is sent once per person by its template)", st.Template)
		}
		seen[st.Template] = true
		after := v.str(sf["after"], "step after")
		d, err := time.ParseDuration(after)
		switch {
		case after == "":
			v.add(stn.Line, "step %q: missing after (the delay since confirmation, e.g. 5m or 72h)", st.Template)
		case err != nil || d < 0:
			v.add(sf["after"].Line, "step %q: after %q: want a duration such as 5m or 72h (no days: 7 days is 168h)", st.Template, after)
		case d <= last:
			v.add(sf["after"].Line, "step %q: after %s: steps must come later than the one before (%s)", st.Template, d, last)
		}
		st.After = d
		last = max(last, d)
		seq.Steps = append(seq.Steps, st)
	}
	return seq
}

// prefixLines puts p in front of each line of err.
func prefixLines(p string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = p + l
	}
	return errors.New(strings.Join(lines, "\n"))
}
