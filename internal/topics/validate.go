package topics

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The longest texts a topic and a step take (in characters): a name fits
// a form's label and a List-Id, a subject an inbox line.
const (
	MaxTopicName        = 80
	MaxTopicDescription = 300
	MaxStepSubject      = 200
	MaxStepBody         = 64 << 10
)

// CheckID refuses a topic id that is not 1 to 32 of [a-z0-9-] (it names
// Redis keys, URLs and List-Ids).
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("topic id %q: use 1 to 32 lower-case letters, digits and - (starting with a letter or digit)", id)
	}
	return nil
}

// checkFeedURL is the reason raw is no feed address ("" : it is one).
func checkFeedURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return "want an absolute http(s) URL such as https://example.com/feed.xml"
	case u.User != nil:
		return "no user or password in the URL (it is logged)"
	case len(raw) > maxFeedURL || strings.ContainsAny(raw, " \t"):
		return fmt.Sprintf("want at most %d characters and no spaces", maxFeedURL)
	}
	return ""
}

// checkStepTemplate is the reason name cannot name a step ("" : it can).
func checkStepTemplate(name string) string {
	switch {
	case !templatePattern.MatchString(name):
		return "use lower-case letters, digits and - (the file names <template>.txt and .html)"
	case slices.Contains(reservedTemplates, name):
		return fmt.Sprintf("that name is another mail's (%s)", strings.Join(reservedTemplates, ", "))
	}
	return ""
}

// plainText is the reason s cannot be a one-line text of at most max
// characters ("" : it can): control characters would break a header or a
// page open.
func plainText(s string, max int) string {
	if !utf8.ValidString(s) {
		return "not UTF-8"
	}
	if n := utf8.RuneCountInString(s); n > max {
		return fmt.Sprintf("at most %d characters (got %d)", max, n)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return "no control characters or line breaks"
	}
	return ""
}

// Validate checks a Set made in the console or the API the way Parse
// checks a topics file, and normalizes it in place (trimmed texts, each
// feed's topic, mode and max_per_day). The error names every mistake, one
// per line.
func (s *Set) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for i := range s.Topics {
		t := &s.Topics[i]
		t.ID, t.Name, t.Description = strings.TrimSpace(t.ID), strings.TrimSpace(t.Name), strings.TrimSpace(t.Description)
		if err := CheckID(t.ID); err != nil {
			add("%v", err)
		} else if seen[t.ID] {
			add("topic id %q: declared twice", t.ID)
		}
		seen[t.ID] = true
		if t.Name == "" {
			add("topic %q: missing name (shown on the form and in List-Id)", t.ID)
		} else if why := plainText(t.Name, MaxTopicName); why != "" {
			add("topic %q: name: %s", t.ID, why)
		}
		if why := plainText(t.Description, MaxTopicDescription); why != "" {
			add("topic %q: description: %s", t.ID, why)
		}
		if t.Retired && (t.ID == Digest || t.ID == Updates) {
			add("topic %q: cannot be retired (the service sends to it)", t.ID)
		}
		var urls []string
		for j := range t.Feeds {
			f := &t.Feeds[j]
			f.Topic, f.URL = t.ID, strings.TrimSpace(f.URL)
			if f.Mode == "" {
				f.Mode = FeedDigest
			}
			switch {
			case checkFeedURL(f.URL) != "":
				add("topic %q: feed %q: %s", t.ID, f.URL, checkFeedURL(f.URL))
			case slices.Contains(urls, f.URL):
				add("topic %q: feed %q: listed twice", t.ID, f.URL)
			}
			urls = append(urls, f.URL)
			switch {
			case !slices.Contains(FeedModes, f.Mode):
				add("topic %q: feed mode %q: want %s (entries become digest items) or %s (each entry an issue of its own)", t.ID, f.Mode, FeedDigest, FeedEach)
			case f.Mode == FeedDigest && f.MaxPerDay != 0:
				add("topic %q: feed max_per_day: only for mode %s (a digest feed's entries wait for the digest)", t.ID, FeedEach)
			case f.Mode == FeedEach && f.MaxPerDay == 0:
				f.MaxPerDay = DefaultFeedMaxPerDay
			case f.Mode == FeedEach && (f.MaxPerDay < 1 || f.MaxPerDay > MaxFeedMaxPerDay):
				add("topic %q: feed max_per_day %d: want a whole number from 1 to %d", t.ID, f.MaxPerDay, MaxFeedMaxPerDay)
			}
		}
	}
	for _, need := range []string{Digest, Updates} {
		if !seen[need] {
			add("topics: no topic with id %q (the %s goes to it)", need, map[string]string{Digest: "weekly digest", Updates: "event notifications"}[need])
		}
	}
	errs = append(errs, s.Sequence.validate(s)...)
	return errors.Join(errs...)
}

func (q *Sequence) validate(s *Set) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if t, ok := s.Topic(q.Topic); !ok || t.Retired {
		add("sequence topic %q: not one of the topics on offer", q.Topic)
	}
	if len(q.Steps) == 0 {
		add("sequence: want at least one step; the first replaces the welcome")
	}
	seen := map[string]bool{}
	var last time.Duration = -1
	for i := range q.Steps {
		st := &q.Steps[i]
		st.Template, st.Subject = strings.TrimSpace(st.Template), strings.TrimSpace(st.Subject)
		switch why := checkStepTemplate(st.Template); {
		case why != "":
			add("step template %q: %s", st.Template, why)
		case seen[st.Template]:
			add("step template %q: used twice (each step is sent once per person by its template)", st.Template)
		}
		seen[st.Template] = true
		switch {
		case st.After < 0:
			add("step %q: after %s: want a delay since confirmation of 0 or more", st.Template, st.After)
		case st.After <= last:
			add("step %q: after %s: steps must come later than the one before (%s)", st.Template, st.After, last)
		}
		last = max(last, st.After)
		switch {
		case st.Body == "" && st.Subject != "":
			add("step %q: a subject needs a body (or neither: the step's template files)", st.Template)
		case st.Body != "" && st.Subject == "":
			add("step %q: missing subject", st.Template)
		case st.Body != "":
			if why := plainText(st.Subject, MaxStepSubject); why != "" {
				add("step %q: subject: %s", st.Template, why)
			}
			if len(st.Body) > MaxStepBody || !utf8.ValidString(st.Body) {
				add("step %q: body: want UTF-8 Markdown of at most %d bytes", st.Template, MaxStepBody)
			}
		}
	}
	return errs
}

// CheckChange refuses next as the successor of prev when it drops a
// topic: people, issues and bitmaps keep a topic's id, so a topic is
// retired, never deleted.
func CheckChange(prev, next *Set) error {
	var gone []string
	for _, t := range prev.Topics {
		if _, ok := next.Topic(t.ID); !ok {
			gone = append(gone, fmt.Sprintf("%q", t.ID))
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("topics %s: a topic cannot be removed (people and issues keep its id); retire it instead", strings.Join(gone, ", "))
	}
	return nil
}
