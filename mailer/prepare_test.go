package mailer

import (
	"os"
	"path/filepath"
	"testing"
)

var preparedItems = []Entry{
	{Title: "Release 2.0 <beta> & more", URL: "https://example.com/2.0?a=1&b=2", Summary: "It is \"out\"."},
	{Title: "Café news", URL: "https://example.com/caf%C3%A9"},
}

// recipients of every shape: with and without a name, plain and not.
var preparedRecipients = []Data{
	{Email: "ann@example.com", Name: "Ann Lee", UnsubscribeURL: "https://news.example.com/unsubscribe?token=abc.DEF-1_2"},
	{Email: "bob@example.com", UnsubscribeURL: "https://news.example.com/unsubscribe?token=xyz"},
	{Email: "o'brien@example.com", Name: "Seán <O'Brien> & Co", UnsubscribeURL: "https://news.example.com/unsubscribe?token=q"},
	{Email: "carl+news@example.com", Name: "Carl", UnsubscribeURL: "https://news.example.com/unsubscribe?token=r"},
	{Email: "dora@example.com", Name: "Dora", UnsubscribeURL: "https://news.example.com/unsubscribe?token=s"},
}

// TestPreparedEqualsFullRender: for every recipient, the prepared mail is
// byte for byte the full render, and the plain ones take the fast path.
func TestPreparedEqualsFullRender(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{KindDigest, KindEvents, KindWelcome} {
		shared := Data{Period: "2026-W49", Entries: preparedItems}
		p, err := r.Prepare(kind, shared)
		if err != nil {
			t.Fatal(err)
		}
		for _, rcpt := range preparedRecipients {
			got, err := p.Render(rcpt)
			if err != nil {
				t.Fatal(err)
			}
			full := shared
			full.Email, full.Name, full.UnsubscribeURL = rcpt.Email, rcpt.Name, rcpt.UnsubscribeURL
			want, err := r.Render(kind, full)
			if err != nil {
				t.Fatal(err)
			}
			if public(got) != *want {
				t.Fatalf("%s to %s: prepared\n%+v\nfull\n%+v", kind, rcpt.Email, got, want)
			}
		}
		// ann, bob and dora are plain; the first of each shape is also
		// rendered whole once to check the fill-in: three fast in all.
		if fast, full, _ := p.Counts(); fast != 3 || full != 2 {
			t.Errorf("%s: %d filled in, %d rendered whole; want 3 and 2", kind, fast, full)
		}
	}
}

// public is m without what ties it to its prepared variant.
func public(m *Message) Message {
	c := *m
	c.prep = nil
	return c
}

func TestPreparableTemplates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Printing and testing for emptiness is fine; anything else is not.
	write("digest.txt", `{{define "subject"}}News{{end}}Hi{{if .Name}} {{.Name}}{{end}} {{printf "%s" .Email}}`)
	// The link in a script: escaped differently from the text around it.
	write("events.html", `{{define "body"}}<script>var u = "{{.UnsubscribeURL}}";</script>{{range .Entries}}{{.Title}}{{end}}{{end}}`)
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.cur.Load().preparable[KindDigest] {
		t.Fatal("a template that passes .Email to printf was judged preparable")
	}
	if !r.cur.Load().preparable[KindWelcome] {
		t.Fatal("the built-in welcome was judged not preparable")
	}
	for _, kind := range []string{KindDigest, KindEvents} {
		p, err := r.Prepare(kind, Data{Entries: preparedItems})
		if err != nil {
			t.Fatal(err)
		}
		for _, rcpt := range preparedRecipients[:2] {
			got, err := p.Render(rcpt)
			if err != nil {
				t.Fatal(err)
			}
			full := Data{Entries: preparedItems, Email: rcpt.Email, Name: rcpt.Name, UnsubscribeURL: rcpt.UnsubscribeURL}
			want, _ := r.Render(kind, full)
			if public(got) != *want {
				t.Fatalf("%s: prepared mail differs from the full render:\n%q\n%q", kind, got.HTML, want.HTML)
			}
		}
		if fast, _, _ := p.Counts(); fast != 0 {
			t.Errorf("%s: %d mails filled in from a template that escapes the fields differently", kind, fast)
		}
	}
}

func TestPreparedTemplateError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "digest.txt"), []byte(`{{define "subject"}}News{{end}}{{.NoSuchField}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Prepare(KindDigest, Data{Entries: preparedItems})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Render(preparedRecipients[0]); err == nil {
		t.Fatal("a template error went unnoticed")
	}
	if _, err := r.Prepare("nope", Data{}); err == nil {
		t.Fatal("unknown kind prepared")
	}
}
