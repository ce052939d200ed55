package mailer

import (
	"fmt"
	"slices"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
)

// sampleData has every field a template can show, so that a template
// that names a field mails do not have fails on it (text/template tells
// an unknown field only when it runs).
func sampleData() Data {
	return Data{
		Email: "reader@example.com", Name: "Ada", ConfirmURL: "https://example.com/confirm?token=t",
		UnsubscribeURL: "https://example.com/unsubscribe?token=t", PreferencesURL: "https://example.com/preferences?token=t",
		Topic: "Weekly digest", ListID: "Weekly digest <digest.list.example.com>", ReplyTo: "editor@example.com",
		Period: "2026-W01", Entries: []Entry{{Title: "An entry", URL: "https://example.com/a", Summary: "What it is."}},
		Subject: "An issue", Preheader: "Its first line", IssueHTML: "<p>Body</p>", IssueText: "Body",
		ArchiveURL: "https://example.com/archive/an-issue", Reader: "r",
		Subscriber: Recipient{Email: "reader@example.com", Name: "Ada", Fields: map[string]string{"company": "Acme"}, Tags: []string{"beta"}},
		Newsletter: Newsletter{Name: "The Letter", Description: "Weekly.", PostalAddress: "1 Main St", LogoURL: "https://example.com/logo.png", Accent: "#0b5fff", From: "The Letter <news@example.com>"},
		Invite:     Invite{By: "ada", Role: "editor", Link: "https://example.com/admin/invite?token=t", Expires: "2026-01-02 15:04 UTC"},
	}
}

// sparseData is what a mail may well have: a reader without a name,
// fields or tags, a step with no digest items yet; the links every mail
// carries. A template must render with it too (an {{index .Entries 0}}
// that sample data satisfies fails for a real reader).
func sparseData() Data {
	return Data{
		Email: "reader@example.com", ConfirmURL: "https://example.com/confirm?token=t",
		UnsubscribeURL: "https://example.com/unsubscribe?token=t", PreferencesURL: "https://example.com/preferences?token=t",
		Subscriber: Recipient{Email: "reader@example.com", Fields: map[string]string{}},
	}
}

// mustShow are the fields a kind's templates must show: without them the
// mail does not do its job (a confirmation without its link, an issue
// without its text, a one-click leave without its link).
var mustShow = map[string][]string{
	KindConfirm:     {"ConfirmURL"},
	KindUnsubscribe: {"UnsubscribeURL"},
	KindPreferences: {"PreferencesURL"},
	KindIssue:       {"IssueHTML", "IssueText"},
}

// CheckTemplates refuses templates that mail cannot be made from: one
// that does not parse, a step without templates, a field that mails do not
// have, a template that fails for a reader with little data (no name, no
// fields, no items), a layout that leaves out the body or the footer's
// link, a kind that leaves out what it is for (mustShow), a template
// whose work has no bound (checkCost) or that writes over MaxCheckBytes
// with sample data. Every kind and step is rendered with sample data and
// with sparse data.
//
// Go's template errors come back in plain words, naming the template,
// its part and the line (a *TemplateError).
func CheckTemplates(src Sources, steps ...string) error {
	err := checkTemplates(src, steps...)
	if err == nil {
		return nil
	}
	layout, rerr := templateFiles{src}.read("layout.html")
	if rerr != nil {
		return err
	}
	return explain(err, strings.Count(layout, "\n"))
}

func checkTemplates(src Sources, steps ...string) error {
	r, err := Compile(src, steps...)
	if err != nil {
		return err
	}
	t := r.cur.Load()
	t.limit = MaxCheckBytes
	if err := t.checkCost(steps); err != nil {
		return err
	}
	for _, k := range templatedKinds(steps) {
		if _, err := r.Render(k, sampleData()); err != nil {
			return fmt.Errorf("template %s: %w", k, err)
		}
		if _, err := r.Render(k, sparseData()); err != nil {
			return fmt.Errorf("template %s: %w", k, &sparseError{err})
		}
		layout := t.html[k].Lookup("layout")
		if layout == nil || !callsTemplate("body", layout.Tree) {
			return fmt.Errorf("template layout: it must show each mail's body ({{template \"body\" .}})")
		}
		if !usesField("PreferencesURL", layout.Tree) && !usesField("UnsubscribeURL", layout.Tree) {
			return fmt.Errorf("template layout: it must link the reader's way out ({{.PreferencesURL}} or {{.UnsubscribeURL}})")
		}
		trees := htmlTrees(t.html[k])
		for _, x := range t.text[k].Templates() {
			trees = append(trees, x.Tree)
		}
		for _, f := range mustShow[k] {
			if !usesField(f, trees...) {
				return fmt.Errorf("template %s: it must show {{.%s}}", k, f)
			}
		}
	}
	d := sampleData()
	for _, entries := range [][]Entry{d.Entries, nil} {
		if _, _, err := r.DigestIssue("2026-W01", entries); err != nil {
			return err
		}
	}
	for _, e := range []Entry{d.Entries[0], {URL: "https://example.com/b"}} {
		if _, _, err := r.PostIssue(e); err != nil {
			return err
		}
	}
	return nil
}

// checkCost refuses, before anything runs, a template whose work has no
// bound: one that calls itself, or whose ranges and calls could run over
// maxTemplateSteps steps (templateSteps).
func (r *templates) checkCost(steps []string) error {
	type set struct {
		name   string
		trees  []*parse.Tree
		lookup func(string) *parse.Tree
	}
	var sets []set
	for _, k := range templatedKinds(steps) {
		txt, html := r.text[k], r.html[k]
		sets = append(sets,
			set{k + ".txt", treesOf(txt), func(n string) *parse.Tree { return treeOf(txt.Lookup(n)) }},
			set{k + ".html", htmlTrees(html), func(n string) *parse.Tree {
				if x := html.Lookup(n); x != nil {
					return x.Tree
				}
				return nil
			}})
	}
	for name, t := range map[string]*texttemplate.Template{DigestBodyTemplate: r.digestBody, PostBodyTemplate: r.postBody} {
		sets = append(sets, set{name, treesOf(t), func(n string) *parse.Tree { return treeOf(t.Lookup(n)) }})
	}
	for _, s := range sets {
		for _, tree := range s.trees {
			if _, err := templateSteps(tree, s.lookup); err != nil {
				return fmt.Errorf("template %s: %w", s.name, err)
			}
		}
	}
	return nil
}

func treesOf(t *texttemplate.Template) []*parse.Tree {
	var out []*parse.Tree
	for _, x := range t.Templates() {
		out = append(out, x.Tree)
	}
	return out
}

func treeOf(t *texttemplate.Template) *parse.Tree {
	if t == nil {
		return nil
	}
	return t.Tree
}

// Builtin is the built-in text of template name (TemplateNames), as a
// stored one would hold it: what the console shows before anything is
// saved.
func Builtin(name string) (TemplateText, bool) {
	if !slices.Contains(TemplateNames(), name) {
		return TemplateText{}, false
	}
	files := map[string][2]string{TemplateLayout: {"", "layout.html"}, TemplateDigestIssue: {DigestBodyTemplate, ""}, TemplatePostIssue: {PostBodyTemplate, ""}}
	f, ok := files[name]
	if !ok {
		f = [2]string{name + ".txt", name + ".html"}
	}
	var t TemplateText
	if f[0] != "" {
		b, _ := embedded.ReadFile("templates/" + f[0]) // every built-in one is embedded
		t.Text = string(b)
	}
	if f[1] != "" {
		b, _ := embedded.ReadFile("templates/" + f[1])
		t.HTML = string(b)
	}
	return t, true
}

// callsTemplate reports whether any of trees runs {{template name}}.
func callsTemplate(name string, trees ...*parse.Tree) bool {
	return anyNode(func(n parse.Node) bool {
		t, ok := n.(*parse.TemplateNode)
		return ok && t.Name == name
	}, trees...)
}
