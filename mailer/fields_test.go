package mailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A template sees the reader's custom fields: a field they have no value
// of falls back (or, default), and a value is escaped as every other
// (html/template in the HTML part). Such a template is rendered in full
// per reader, never filled in from a prepared mail, so no reader gets
// another's value.
func TestTemplateSeesFields(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"issue.txt":  `{{define "subject"}}{{.Subject}}{{end}}Hi {{.Subscriber.Fields.company | default "there"}}, plan {{or .Subscriber.Fields.plan "none"}}.` + "\n{{.IssueText}}",
		"issue.html": `{{define "body"}}<p>Hi {{.Subscriber.Fields.company | default "there"}}, plan {{or .Subscriber.Fields.plan "none"}}.</p>{{.IssueHTML}}{{end}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.cur.Load().preparable[KindIssue] {
		t.Fatal("a template that shows a reader's fields is filled in from a prepared mail")
	}
	base := Data{Email: "a@b.co", Subject: "News", IssueHTML: "<p>Body</p>", IssueText: "Body", PreferencesURL: "https://x/p"}
	with := base
	with.Subscriber = Recipient{Email: "a@b.co", Fields: map[string]string{"company": `Acme <b>&</b> "Co"`, "plan": "pro"}}
	m, err := r.Render(KindIssue, with)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, `Hi Acme <b>&</b> "Co", plan pro.`) {
		t.Errorf("text part: %q", m.Text)
	}
	if !strings.Contains(m.HTML, `Hi Acme &lt;b&gt;&amp;&lt;/b&gt; &#34;Co&#34;, plan pro.`) {
		t.Errorf("html part, not escaped: %q", m.HTML)
	}
	// No fields at all, and one field empty: the fallbacks.
	for _, fields := range []map[string]string{nil, {"company": ""}} {
		d := base
		d.Subscriber.Fields = fields
		m, err := r.Render(KindIssue, d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Text, "Hi there, plan none.") || !strings.Contains(m.HTML, "Hi there, plan none.") {
			t.Errorf("fields %v: no fallback: %q %q", fields, m.Text, m.HTML)
		}
	}
}
