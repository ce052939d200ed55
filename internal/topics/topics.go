package topics

import (
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"
)

// The topics the service itself sends to: the weekly digest goes to the
// active subscribers of Digest, event notifications only to those of
// Updates. A topics file must declare both.
const (
	Digest  = "digest"
	Updates = "updates"
)

// Topic is one kind of mail a person can subscribe to.
type Topic struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Default: ticked on the signup form, and given to subscribers who
	// were on the list before topics existed.
	Default bool `json:"default"`
	// Feeds are RSS or Atom feeds whose new entries reach this topic's
	// readers (absolute http(s) URLs, each once per topic): as items of
	// its digest, or each as an issue of its own (Feed.Mode).
	Feeds []Feed `json:"feeds,omitempty"`
	// Private keeps the topic's sent issues out of the public archive and
	// feed (the file's "archive: false"; topics are public by default).
	Private bool `json:"private,omitempty"`
	// Retired: no longer offered (the form, the preferences, a new
	// issue's audience) nor chosen for anyone, but kept: its id names
	// who had it, and a topic is never deleted.
	Retired bool `json:"retired,omitempty"`
	// Assigned keeps the topic off the public signup (the file's
	// "public: false"; the API's "public": false): the product gives it
	// to people, through the admin API, the console or an import. The
	// public form neither shows nor takes it, and the preference centre
	// shows it only to someone who has it (to leave it).
	Assigned bool `json:"assigned,omitempty"`
}

// ErrNotPublic is wrapped by CheckSignup's error: a topic the public
// signup does not take.
var ErrNotPublic = errors.New("not open to signup")

// Signup are the topics the public form offers: those offered that are
// not Assigned.
func (s *Set) Signup() []Topic {
	var out []Topic
	for _, t := range s.Offered() {
		if !t.Assigned {
			out = append(out, t)
		}
	}
	return out
}

// SignupDefaults are the default topics the public signup gives (the
// defaults less the Assigned ones).
func (s *Set) SignupDefaults() []string {
	var out []string
	for _, id := range s.Defaults() {
		if t, _ := s.Topic(id); !t.Assigned {
			out = append(out, id)
		}
	}
	return out
}

// CheckSignup is Check for the public signup: an Assigned topic is an
// error too (ErrNotPublic), however the request was made.
func (s *Set) CheckSignup(ids []string) ([]string, error) {
	out, err := s.Check(ids)
	if err != nil {
		return nil, err
	}
	for _, id := range out {
		if t, _ := s.Topic(id); t.Assigned {
			return nil, fmt.Errorf("topic %q is %w: it is given by the newsletter, not chosen here", id, ErrNotPublic)
		}
	}
	return out, nil
}

// Public tells whether the sent issues of topic id show in the archive.
func (s *Set) Public(id string) bool {
	t, ok := s.Topic(id)
	return ok && !t.Private
}

// Step is one mail of the onboarding sequence: Template (its .txt and
// .html) sent After the subscriber's confirmation.
type Step struct {
	Template string        `json:"template"`
	After    time.Duration `json:"after"`
	// Subject and Body (Markdown), when Body is set, are the step's mail
	// as written in the console: they take the place of the template
	// files of Template (see mailer.StepTemplates).
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body,omitempty"`
}

// Sequence is the onboarding series. Its first step replaces the welcome;
// leaving Topic (or everything) cancels the rest.
type Sequence struct {
	Topic string `json:"topic"`
	Steps []Step `json:"steps"` // by After, strictly growing
}

// Set is the validated declaration. It is read-only once made: a change
// is a new Set (see Source).
type Set struct {
	Topics   []Topic  `json:"topics"`
	Sequence Sequence `json:"sequence"`
}

// Source gives the topics in effect. A *Set is a Source of itself (tests,
// commands that run once); the service's roles read the stored topics
// through internal/catalog, which follows the console's changes.
// Current never blocks on Redis and never returns nil.
type Source interface {
	Current() *Set
}

// Current implements Source.
func (s *Set) Current() *Set { return s }

// Default is the built-in set: the digest and updates topics, both on at
// signup, and the welcome alone after welcomeDelay.
func Default(welcomeDelay time.Duration) *Set {
	return &Set{
		Topics: []Topic{
			{ID: Digest, Name: "Weekly digest", Description: "One mail a week with what is new.", Default: true},
			{ID: Updates, Name: "Product updates", Description: "A short note when something you follow changes.", Default: true},
		},
		Sequence: defaultSequence(welcomeDelay),
	}
}

func defaultSequence(welcomeDelay time.Duration) Sequence {
	return Sequence{Topic: Digest, Steps: []Step{{Template: "welcome", After: welcomeDelay}}}
}

// IDs are the topic ids in the file's order.
func (s *Set) IDs() []string {
	out := make([]string, len(s.Topics))
	for i, t := range s.Topics {
		out[i] = t.ID
	}
	return out
}

// The modes of a feed: what its new entries become.
const (
	// FeedDigest: each new entry is an item of the topic, listed in its
	// digest (the default, and the only mode before modes existed).
	FeedDigest = "digest"
	// FeedEach: each new entry is an issue of the topic of its own, sent
	// to the topic's readers at once, at most MaxPerDay a day.
	FeedEach = "each"
)

// FeedModes are the values of a feed's mode, the default first.
var FeedModes = []string{FeedDigest, FeedEach}

// The bounds of a feed's max_per_day (mode each): a feed that posts more
// is a firehose, better read as a digest.
const (
	DefaultFeedMaxPerDay = 3
	MaxFeedMaxPerDay     = 24
)

// Feed is one feed of the topics file with the topic its entries go to.
type Feed struct {
	Topic string `json:"topic"`
	URL   string `json:"url"`
	// Mode is FeedDigest or FeedEach.
	Mode string `json:"mode"`
	// MaxPerDay, in mode FeedEach, is how many of the feed's entries
	// become issues sent in one UTC day; the others wait for the next
	// day (0 in mode FeedDigest).
	MaxPerDay int `json:"max_per_day,omitempty"`
}

// Feeds are every topic's feeds, in the file's order (a retired topic's
// are not read).
func (s *Set) Feeds() []Feed {
	var out []Feed
	for _, t := range s.Offered() {
		out = append(out, t.Feeds...)
	}
	return out
}

// Defaults are the ids of the topics on by default.
func (s *Set) Defaults() []string {
	var out []string
	for _, t := range s.Topics {
		if t.Default && !t.Retired {
			out = append(out, t.ID)
		}
	}
	return out
}

// Topic returns the topic with id.
func (s *Set) Topic(id string) (Topic, bool) {
	for _, t := range s.Topics {
		if t.ID == id {
			return t, true
		}
	}
	return Topic{}, false
}

// Offered are the topics a person or an issue can choose: all but the
// retired ones, in order.
func (s *Set) Offered() []Topic {
	var out []Topic
	for _, t := range s.Topics {
		if !t.Retired {
			out = append(out, t)
		}
	}
	return out
}

// ErrUnknown is wrapped by Check's error.
var ErrUnknown = errors.New("unknown topic")

// Check returns ids deduplicated in the file's order, or an error naming
// every id that is not a topic one can choose (unknown or retired).
func (s *Set) Check(ids []string) ([]string, error) {
	var unknown []string
	for _, id := range ids {
		if t, ok := s.Topic(id); !ok || t.Retired {
			unknown = append(unknown, fmt.Sprintf("%q", id))
		}
	}
	if len(unknown) > 0 {
		var offered []string
		for _, t := range s.Offered() {
			offered = append(offered, t.ID)
		}
		return nil, fmt.Errorf("%w %s: choose from %s", ErrUnknown, strings.Join(unknown, ", "), strings.Join(offered, ", "))
	}
	var out []string
	for _, t := range s.Topics {
		if slices.Contains(ids, t.ID) {
			out = append(out, t.ID)
		}
	}
	return out, nil
}

// Templates are the sequence's templates, in order.
func (s *Set) Templates() []string {
	out := make([]string, len(s.Sequence.Steps))
	for i, st := range s.Sequence.Steps {
		out[i] = st.Template
	}
	return out
}

// ListID is the RFC 2919 List-Id of topic id for the list whose base is
// "<name> <list.example.com>" (the From's): each topic is a list of its
// own, "<topic name> <id.list.example.com>", so a reader's filters and a
// provider's per-list unsubscribe tell them apart.
func (s *Set) ListID(id, base string) string {
	t, ok := s.Topic(id)
	open, close := strings.LastIndexByte(base, '<'), strings.LastIndexByte(base, '>')
	if !ok || open < 0 || close < open {
		return base
	}
	return mime.QEncoding.Encode("utf-8", t.Name) + " <" + id + "." + base[open+1:close] + ">"
}

// Missing reports whether s gives no topics: nil, or a nil *Set (a
// caller's "the built-in ones").
func Missing(s Source) bool {
	set, isSet := s.(*Set)
	return s == nil || (isSet && set == nil)
}

// Of is the set s has in effect, the built-in one when s is Missing.
func Of(s Source) *Set {
	if Missing(s) {
		return Default(0)
	}
	return s.Current()
}
