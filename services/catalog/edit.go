package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
)

// What the API and the console share when they show and edit the catalog:
// the JSON shapes of topics, steps and templates, and the checks and
// audit wording both apply.

// BuiltinTemplates gives the built-in templates' text (mailer.Builtin
// and mailer.TemplateNames; the API does not depend on the mailer).
type BuiltinTemplates interface {
	Names() []string
	Builtin(name string) (text, html string, ok bool)
}

// TopicJSON is a topic as the API shows and takes it.
type TopicJSON struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Default     bool       `json:"default"`
	Archive     *bool      `json:"archive,omitempty"` // absent: true (its sent issues are public)
	Public      *bool      `json:"public,omitempty"`  // absent: true (offered on the public signup form)
	Retired     bool       `json:"retired"`
	Feeds       []FeedJSON `json:"feeds"`
}

// FeedJSON is a topic's feed.
type FeedJSON struct {
	URL       string `json:"url"`
	Mode      string `json:"mode,omitempty"` // digest (default) or each
	MaxPerDay int    `json:"max_per_day,omitempty"`
}

// StepJSON is a step of the sequence: After is a duration ("72h").
type StepJSON struct {
	Template string `json:"template"`
	After    string `json:"after"`
	Subject  string `json:"subject,omitempty"`
	Body     string `json:"body,omitempty"`
}

// TopicsToJSON are set's topics as the API shows them.
func TopicsToJSON(set *topics.Set) []TopicJSON {
	out := make([]TopicJSON, 0, len(set.Topics))
	for _, t := range set.Topics {
		archived, public := !t.Private, !t.Assigned
		j := TopicJSON{ID: t.ID, Name: t.Name, Description: t.Description, Default: t.Default, Archive: &archived, Public: &public, Retired: t.Retired, Feeds: []FeedJSON{}}
		for _, f := range t.Feeds {
			j.Feeds = append(j.Feeds, FeedJSON{URL: f.URL, Mode: f.Mode, MaxPerDay: f.MaxPerDay})
		}
		out = append(out, j)
	}
	return out
}

// TopicFromJSON is j as a topic (Validate checks it).
func TopicFromJSON(j TopicJSON) topics.Topic {
	t := topics.Topic{ID: j.ID, Name: j.Name, Description: j.Description, Default: j.Default, Private: j.Archive != nil && !*j.Archive,
		Assigned: j.Public != nil && !*j.Public, Retired: j.Retired}
	for _, f := range j.Feeds {
		t.Feeds = append(t.Feeds, topics.Feed{Topic: j.ID, URL: f.URL, Mode: f.Mode, MaxPerDay: f.MaxPerDay})
	}
	return t
}

// StepsToJSON are seq's steps as the API shows them.
func StepsToJSON(seq topics.Sequence) []StepJSON {
	out := make([]StepJSON, 0, len(seq.Steps))
	for _, s := range seq.Steps {
		out = append(out, StepJSON{Template: s.Template, After: s.After.String(), Subject: s.Subject, Body: s.Body})
	}
	return out
}

// StepsFromJSON reads the steps, refusing a delay that is not a duration.
func StepsFromJSON(in []StepJSON) ([]topics.Step, error) {
	out := make([]topics.Step, 0, len(in))
	for _, j := range in {
		d, err := time.ParseDuration(strings.TrimSpace(j.After))
		if err != nil {
			return nil, fmt.Errorf("step %q: after %q: want a duration such as 5m or 72h (no days: 7 days is 168h)", j.Template, j.After)
		}
		out = append(out, topics.Step{Template: j.Template, After: d, Subject: j.Subject, Body: j.Body})
	}
	return out, nil
}

// CloneSet is a copy of set whose lists can be changed (the console's
// forms change one topic or the sequence of the catalog in effect).
func CloneSet(set *topics.Set) topics.Set {
	out := topics.Set{Topics: slices.Clone(set.Topics), Sequence: topics.Sequence{Topic: set.Sequence.Topic, Steps: slices.Clone(set.Sequence.Steps)}}
	for i := range out.Topics {
		out.Topics[i].Feeds = slices.Clone(out.Topics[i].Feeds)
	}
	return out
}

// ChangedTopics names what a save changed, for the audit log (the API's
// and the console's entries read alike).
func ChangedTopics(prev *topics.Set, next topics.Set) string {
	var out []string
	for _, t := range next.Topics {
		old, ok := prev.Topic(t.ID)
		switch {
		case !ok:
			out = append(out, "added "+t.ID)
		case old.Retired != t.Retired && t.Retired:
			out = append(out, "retired "+t.ID)
		case old.Name != t.Name || old.Description != t.Description || old.Default != t.Default || old.Private != t.Private || old.Assigned != t.Assigned || old.Retired != t.Retired || !slices.Equal(old.Feeds, t.Feeds):
			out = append(out, "changed "+t.ID)
		}
	}
	if len(out) == 0 {
		return "order"
	}
	return strings.Join(out, ", ")
}

// TemplateJSON is a template as the API shows it (and the console lists it).
type TemplateJSON struct {
	Name    string `json:"name"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	Version int64  `json:"version"`
	Stored  bool   `json:"stored"`
	Step    bool   `json:"step,omitempty"`
}

// TemplateNames are the templates one can edit: builtins' names,
// then set's steps'.
func TemplateNames(builtins BuiltinTemplates, set *topics.Set) []string {
	names := slices.Clone(builtins.Names())
	for _, st := range set.Sequence.Steps {
		if !slices.Contains(names, st.Template) {
			names = append(names, st.Template)
		}
	}
	return names
}

// Template is template name's text in snap: the stored one, else
// the built-in (false: no such template to edit).
func Template(builtins BuiltinTemplates, snap Snapshot, name string) (TemplateJSON, bool) {
	if !slices.Contains(TemplateNames(builtins, snap.Set), name) {
		return TemplateJSON{}, false
	}
	t := TemplateJSON{Name: name}
	t.Step = slices.Contains(snap.Set.Templates(), name)
	if st, ok := snap.Templates[name]; ok {
		t.Text, t.HTML, t.Version, t.Stored = st.Text, st.HTML, st.Version, true
	}
	if text, html, ok := builtins.Builtin(name); ok {
		t.Text, t.HTML = cmp.Or(t.Text, text), cmp.Or(t.HTML, html)
	}
	return t, true
}
