package form

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// MaxIssueForm bounds an issue's form: the body's limit and room for the
// other fields, so an over-long body reaches issues.CheckContent (413 with its
// message) rather than being cut.
const MaxIssueForm = issues.MaxBody + 64<<10

// Issue is the editor's form.
type Issue struct {
	Subject   string
	Preheader string
	Body      string
	Topics    []string
	// ReplyTo is the issue's Reply-To ("": the service's From).
	ReplyTo string
	// Segment is the saved segment the issue goes to (0: the readers of
	// Topics alone; with topics too, those of its people who follow one
	// of them). The form's audience "segment" without a segment picked
	// is NoSegment, which the console refuses.
	Segment int64
	// Slug is the archive address the writer chose for a saved issue
	// ("": it keeps its own).
	Slug string
	// Version is the version the writer opened (0: a new issue): a
	// save over a later one is refused, nothing lost.
	Version int
}

// NoSegment is Issue.Segment when the form chose a segment and named
// none.
const NoSegment = -1

// NewIssue reads the editor's form. The body keeps its spaces; line
// breaks become \n (browsers send \r\n).
func NewIssue(w http.ResponseWriter, r *http.Request) (Issue, error) {
	if err := parse(w, r, MaxIssueForm); err != nil {
		return Issue{}, err
	}
	return issueOf(r), nil
}

// issueOf is the editor's fields of a parsed form.
func issueOf(r *http.Request) Issue {
	f := Issue{
		Subject: value(r, "subject"), Preheader: value(r, "preheader"),
		Body:    strings.ReplaceAll(r.PostForm.Get("body"), "\r\n", "\n"),
		Topics:  r.PostForm["topics"],
		ReplyTo: issues.NormalizeReplyTo(value(r, "reply_to")),
		Slug:    value(r, "slug"),
		Version: atoi(value(r, "version")),
	}
	if value(r, "audience") == "segment" {
		f.Segment = NoSegment
		if id, err := strconv.ParseInt(value(r, "segment"), 10, 64); err == nil && id > 0 {
			f.Segment = id
		}
	}
	return f
}

// Content is the issue as the store keeps it.
func (f Issue) Content() store.IssueContent {
	return store.IssueContent{Subject: f.Subject, Preheader: f.Preheader, Body: f.Body, Topics: f.Topics, Segment: f.Segment, ReplyTo: f.ReplyTo}
}

// atoi reads a hidden number the console wrote (0 when absent or
// damaged: the store then checks against the version it reads).
func atoi(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
