package form

import (
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/store"
)

// MaxIssueForm bounds an issue's form: the body's limit and room for the
// other fields, so an over-long body reaches api.CheckIssue (413 with its
// message) rather than being cut.
const MaxIssueForm = api.MaxIssueBody + 64<<10

// Issue is the editor's form.
type Issue struct {
	Subject   string
	Preheader string
	Body      string
	Topics    []string
}

// NewIssue reads the editor's form. The body keeps its spaces; line
// breaks become \n (browsers send \r\n).
func NewIssue(w http.ResponseWriter, r *http.Request) (Issue, error) {
	if err := parse(w, r, MaxIssueForm); err != nil {
		return Issue{}, err
	}
	return Issue{
		Subject: value(r, "subject"), Preheader: value(r, "preheader"),
		Body:   strings.ReplaceAll(r.PostForm.Get("body"), "\r\n", "\n"),
		Topics: r.PostForm["topics"],
	}, nil
}

// Content is the issue as the store keeps it.
func (f Issue) Content() store.IssueContent {
	return store.IssueContent{Subject: f.Subject, Preheader: f.Preheader, Body: f.Body, Topics: f.Topics}
}
