package form

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/store"
)

// NewAdd reads the add-a-person form (the API's POST /api/subscribers
// fields; the double opt-in box ticked means pending with a confirmation).
func NewAdd(w http.ResponseWriter, r *http.Request) (subscribers.AddInput, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return subscribers.AddInput{}, err
	}
	topics := r.PostForm["topics"]
	return subscribers.AddInput{Email: value(r, "email"), Name: value(r, "name"), Timezone: value(r, "timezone"),
		Topics: &topics, DoubleOptIn: value(r, "double_optin") != "", Reason: value(r, "reason")}, nil
}

// NewEdit reads the edit form of a person: name, time zone and (when
// the form showed them) topics, tags (separated by commas) and the
// custom fields' values (field.NAME; "" clears one).
func NewEdit(w http.ResponseWriter, r *http.Request) (subscribers.ChangeInput, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return subscribers.ChangeInput{}, err
	}
	name, tz := value(r, "name"), value(r, "timezone")
	in := subscribers.ChangeInput{Name: &name, Timezone: &tz}
	if value(r, "topics_shown") != "" {
		topics := r.PostForm["topics"]
		in.Topics = &topics
	}
	if value(r, "tags_shown") != "" {
		tags := strings.FieldsFunc(value(r, "tags"), func(r rune) bool { return r == ',' })
		for i := range tags {
			tags[i] = strings.TrimSpace(tags[i])
		}
		tags = slices.DeleteFunc(tags, func(t string) bool { return t == "" })
		in.Tags = &tags
	}
	if value(r, "fields_shown") != "" {
		in.Fields = subscribers.FieldValues{}
		for k := range r.PostForm {
			if name, ok := strings.CutPrefix(k, "field."); ok {
				in.Fields[name] = value(r, k)
			}
		}
	}
	return in, nil
}

// Filter reads the list's filter from hidden fields (status, topic, q).
func Filter(r *http.Request) store.Filter {
	return store.Filter{Status: store.Status(value(r, "status")), Topic: value(r, "topic"), Q: value(r, "q")}
}

// NewBulk reads the bulk form: the ticked people (email) or, with
// scope=filter, the list's filter; the action, its topic, and the count
// confirmed for an erasure.
func NewBulk(w http.ResponseWriter, r *http.Request) (subscribers.BulkInput, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return subscribers.BulkInput{}, err
	}
	in := subscribers.BulkInput{Action: value(r, "action"), Topic: value(r, "topic_action"), Tag: value(r, "tag_action")}
	if value(r, "scope") == "filter" {
		f := Filter(r)
		in.Filter = &f
	} else {
		in.Emails = r.PostForm["email"]
		if in.Emails == nil {
			in.Emails = []string{}
		}
	}
	if c := strings.TrimSpace(value(r, "confirm")); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			n = -1 // a count that matches none
		}
		in.Confirm = &n
	}
	return in, nil
}

// NewExport reads the export form (the list's filter).
func NewExport(w http.ResponseWriter, r *http.Request) (store.Filter, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return store.Filter{}, err
	}
	return Filter(r), nil
}
