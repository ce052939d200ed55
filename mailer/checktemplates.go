package mailer

import (
	"fmt"
	"slices"
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
	}
}

// CheckTemplates refuses templates that mail cannot be made from: one
// that does not parse, a step without templates, a field that mails do not
// have. Every kind and step is rendered once with sample data.
func CheckTemplates(src Sources, steps ...string) error {
	r, err := Compile(src, steps...)
	if err != nil {
		return err
	}
	d := sampleData()
	for _, k := range append(Kinds(), steps...) {
		if _, err := r.Render(k, d); err != nil {
			return fmt.Errorf("template %s: %w", k, err)
		}
	}
	if _, _, err := r.DigestIssue("2026-W01", d.Entries); err != nil {
		return err
	}
	if _, _, err := r.PostIssue(d.Entries[0]); err != nil {
		return err
	}
	return nil
}

// KnownTemplate reports whether name is a template one can edit: a
// built-in one's or a step's.
func KnownTemplate(name string, steps []string) bool {
	return slices.Contains(TemplateNames(), name) || slices.Contains(steps, name)
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
