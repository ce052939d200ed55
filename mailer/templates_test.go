package mailer

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/net/html"
)

// textWords are the words a reader sees in a text part, in order: runs of
// letters and digits, and each link whole (found as the dev mailbox finds
// them).
func textWords(s string) []string {
	var out []string
	for {
		loc := urlPattern.FindStringIndex(s)
		if loc == nil {
			return append(out, words(s)...)
		}
		out = append(out, words(s[:loc[0]])...)
		out = append(out, strings.TrimRight(s[loc[0]:loc[1]], ".,;:)"))
		s = s[loc[1]:]
	}
}

// htmlWords are the words a reader sees in an HTML part, in order: the
// body's text (not the head, styles or comments), and each link's target
// after its text.
func htmlWords(t *testing.T, s string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.ElementNode && slices.Contains([]string{"head", "title", "style", "script"}, n.Data):
			return
		case n.Type == html.TextNode:
			out = append(out, words(n.Data)...)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && n.Data == "a" {
			for _, a := range n.Attr {
				if a.Key == "href" {
					out = append(out, a.Val)
				}
			}
		}
	}
	walk(doc)
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// TestHTMLSaysWhatTextSays: a reader whose client shows the text part
// reads what one reading the HTML part does, word for word and link for
// link, in every built-in template.
func TestHTMLSaysWhatTextSays(t *testing.T) {
	steps := []string{"welcome", "getting-started", "best-of"}
	r, err := NewRenderer("", steps...)
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		{Title: "Release 2.0 <beta>", URL: "https://news.example.com/2", Summary: "What changed & why"},
		{Title: "A talk", URL: "https://news.example.com/talk?x=1&y=2"},
	}
	// What each sender passes (tasks/worker): the transactional mails
	// carry one link and no footer; the others the subscriber's links.
	transactional := map[string]Data{
		KindConfirm:     {Email: "ann@example.org", ConfirmURL: "https://news.example.com/confirm?token=c1"},
		KindUnsubscribe: {Email: "ann@example.org", UnsubscribeURL: "https://news.example.com/unsubscribe?token=u1"},
		KindPreferences: {Email: "ann@example.org", PreferencesURL: "https://news.example.com/preferences?token=p1"},
	}
	bulk := Data{
		Email: "ann@example.org", Topic: "Weekly digest", Period: "2026-W05",
		UnsubscribeURL: "https://news.example.com/unsubscribe?token=u1", PreferencesURL: "https://news.example.com/preferences?token=p1",
	}
	for _, kind := range append(Kinds(), steps...) {
		cases := []Data{transactional[kind]}
		if _, ok := transactional[kind]; !ok {
			cases = nil
			for _, name := range []string{"", "Ann Lee"} {
				for _, e := range [][]Entry{nil, entries[:1], entries} {
					d := bulk
					d.Name, d.Entries = name, e
					cases = append(cases, d)
				}
			}
		}
		for _, d := range cases {
			m, err := r.Render(kind, d)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			text, html := textWords(m.Text), htmlWords(t, m.HTML)
			if !slices.Equal(text, html) {
				t.Errorf("%s (name %q, %d entries): the parts say different things\ntext: %s\nhtml: %s",
					kind, d.Name, len(d.Entries), strings.Join(text, " "), strings.Join(html, " "))
			}
		}
	}
}

func TestBestOfListsTheLatestDigest(t *testing.T) {
	r, err := NewRenderer("", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	if !r.UsesEntries("best-of") || !r.UsesEntries(KindDigest) || r.UsesEntries(KindWelcome) || r.UsesEntries(KindConfirm) {
		t.Fatal("UsesEntries does not tell which templates list items")
	}
	d := Data{Email: "ann@example.org", PreferencesURL: "https://news.example.com/preferences?token=p1",
		Entries: []Entry{{Title: "Release 2.0", URL: "https://news.example.com/2", Summary: "What changed"}}}
	m, err := r.Render("best-of", d)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{m.Text, m.HTML} {
		for _, want := range []string{"Release 2.0", "https://news.example.com/2", "What changed"} {
			if !strings.Contains(part, want) {
				t.Errorf("best-of lacks %q:\n%s", want, part)
			}
		}
	}
	// Without items it promises nothing it does not show.
	d.Entries = nil
	if m, err = r.Render("best-of", d); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{m.Text, m.HTML} {
		if strings.Contains(part, "here is") || strings.Contains(part, "liked most") {
			t.Errorf("best-of without items announces a list:\n%s", part)
		}
	}
}
