package form

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/topics"
)

// MaxCatalogForm bounds the sequence's and a template's forms: the API's
// cap on the same documents (a sequence of Markdown steps, a layout).
const MaxCatalogForm = 512 << 10

// errNoVersion is a catalog form without the version its page was read
// at: a save cannot tell whether it would overwrite someone's change.
var errNoVersion = errors.New("the form lacks the version it was opened at; reload the page")

// Topic is the form that adds or changes one topic. FeedsText is the
// feeds as typed (shown again on a refusal), one a line: a URL, then
// optionally the mode and, for mode each, how many a day
// ("https://example.com/feed.xml each 3").
type Topic struct {
	Version                   int64
	ID, Name, Description     string
	Default, Archive, Retired bool
	// Public: offered on the public signup form (unticked: the
	// newsletter assigns it, topics.Topic.Assigned).
	Public    bool
	FeedsText string
	Feeds     []topics.Feed
}

// NewTopic reads the topic form. A feed line that cannot be read is an
// error naming it (the form is shown again with what was typed).
func NewTopic(w http.ResponseWriter, r *http.Request) (Topic, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Topic{Archive: true, Public: true}, err
	}
	f := Topic{ID: value(r, "id"), Name: value(r, "name"), Description: value(r, "description"),
		Default: r.PostForm.Get("default") != "", Archive: r.PostForm.Get("archive") != "", Retired: r.PostForm.Get("retired") != "",
		Public:    r.PostForm.Get("public") != "",
		FeedsText: strings.ReplaceAll(r.PostForm.Get("feeds"), "\r\n", "\n")}
	v, err := version(r)
	if err != nil {
		return f, err
	}
	f.Version = v
	f.Feeds, err = ParseFeeds(f.FeedsText)
	return f, err
}

// Topic is the form's topic (topics.Set.Validate checks it).
func (f Topic) Topic() topics.Topic {
	t := topics.Topic{ID: f.ID, Name: f.Name, Description: f.Description, Default: f.Default, Private: !f.Archive, Assigned: !f.Public, Retired: f.Retired}
	for _, feed := range f.Feeds {
		feed.Topic = f.ID
		t.Feeds = append(t.Feeds, feed)
	}
	return t
}

// FeedsText writes feeds as the form's lines.
func FeedsText(feeds []topics.Feed) string {
	var b strings.Builder
	for _, f := range feeds {
		b.WriteString(f.URL)
		if f.Mode == topics.FeedEach {
			fmt.Fprintf(&b, " %s %d", f.Mode, f.MaxPerDay)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ParseFeeds reads the feed lines: "URL", "URL digest", "URL each" or
// "URL each N". The URL and N are checked by topics.Set.Validate.
func ParseFeeds(text string) ([]topics.Feed, error) {
	var out []topics.Feed
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		f := topics.Feed{URL: fields[0], Mode: topics.FeedDigest}
		if len(fields) > 1 {
			f.Mode = fields[1]
		}
		bad := fmt.Errorf("feeds, line %d: want a URL, then optionally %s or %s and, for %s, how many issues a day (e.g. https://example.com/feed.xml %s 3)",
			i+1, topics.FeedDigest, topics.FeedEach, topics.FeedEach, topics.FeedEach)
		switch {
		case len(fields) > 3, len(fields) == 3 && f.Mode != topics.FeedEach:
			return nil, bad
		case len(fields) == 3:
			n, err := strconv.Atoi(fields[2])
			if err != nil {
				return nil, bad
			}
			f.MaxPerDay = n
		}
		out = append(out, f)
	}
	return out, nil
}

// Step is one row of the sequence form, as typed.
type Step struct {
	Template, After, Subject, Body string
	Remove                         bool
}

// Sequence is the sequence form: its topic and every step, the empty row
// for a new one left out.
type Sequence struct {
	Version int64
	Topic   string
	Steps   []Step
}

// NewSequence reads the sequence form: the fields template, after,
// subject and body repeated once a row, in order, and remove naming the
// rows (from 0) to drop. Bodies keep their spaces; line breaks become \n
// (browsers send \r\n).
func NewSequence(w http.ResponseWriter, r *http.Request) (Sequence, error) {
	if err := parse(w, r, MaxCatalogForm); err != nil {
		return Sequence{}, err
	}
	f := Sequence{Topic: value(r, "topic")}
	tmpl, after, subject, body := r.PostForm["template"], r.PostForm["after"], r.PostForm["subject"], r.PostForm["body"]
	if len(after) != len(tmpl) || len(subject) != len(tmpl) || len(body) != len(tmpl) {
		return f, errors.New("the form's steps are incomplete; reload the page")
	}
	remove := map[string]bool{}
	for _, i := range r.PostForm["remove"] {
		remove[i] = true
	}
	for i := range tmpl {
		st := Step{Template: strings.TrimSpace(tmpl[i]), After: strings.TrimSpace(after[i]), Subject: strings.TrimSpace(subject[i]),
			Body: strings.ReplaceAll(body[i], "\r\n", "\n"), Remove: remove[strconv.Itoa(i)]}
		if st.Template == "" && st.After == "" && st.Subject == "" && strings.TrimSpace(st.Body) == "" {
			continue // the empty row offered for a new step
		}
		f.Steps = append(f.Steps, st)
	}
	v, err := version(r)
	f.Version = v
	return f, err
}

// Template is a mail template's form: its text and HTML parts as typed
// (line breaks as \n), and the version read (0: the built-in one).
type Template struct {
	Version    int64
	Text, HTML string
}

// NewTemplate reads a template's form.
func NewTemplate(w http.ResponseWriter, r *http.Request) (Template, error) {
	if err := parse(w, r, MaxCatalogForm); err != nil {
		return Template{}, err
	}
	f := Template{Text: strings.ReplaceAll(r.PostForm.Get("text"), "\r\n", "\n"), HTML: strings.ReplaceAll(r.PostForm.Get("html"), "\r\n", "\n")}
	v, err := version(r)
	f.Version = v
	return f, err
}

// version is the form's version field: a whole number from 0.
func version(r *http.Request) (int64, error) {
	v, err := strconv.ParseInt(value(r, "version"), 10, 64)
	if err != nil || v < 0 {
		return 0, errNoVersion
	}
	return v, nil
}

// NewCatalogVersion reads a form that carries nothing but the version of
// the catalog its page showed (retire, un-retire).
func NewCatalogVersion(w http.ResponseWriter, r *http.Request) (int64, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return 0, err
	}
	return version(r)
}
