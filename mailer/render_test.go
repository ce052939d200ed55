package mailer

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderAllKinds(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Email: "a@b.co", ConfirmURL: "https://x/confirm?token=c", UnsubscribeURL: "https://x/unsubscribe?token=u",
		PreferencesURL: "https://x/preferences?token=p", Topic: "Weekly digest",
		Period: "2026-W49", Entries: []Entry{{Title: "T <1>", URL: "https://x/1", Summary: "S"}},
		Subject: "Issue one", IssueHTML: "<p>Hello</p>", IssueText: "Hello\n"}
	for _, k := range Kinds() {
		m, err := r.Render(k, d)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if m.Subject == "" || m.Text == "" || !strings.Contains(m.HTML, "<html") {
			t.Fatalf("%s: incomplete %+v", k, m)
		}
		switch k {
		case KindConfirm:
		case KindUnsubscribe:
			// The link a person asked for: the one-click page itself.
			if !strings.Contains(m.Text, d.UnsubscribeURL) || !strings.Contains(m.HTML, `href="https://x/unsubscribe?token=u"`) {
				t.Errorf("%s: no unsubscribe link", k)
			}
		case KindPreferences:
			// The fresh link a person asked for on an expired one's page.
			if !strings.Contains(m.Text, "Your preferences: "+d.PreferencesURL) || !strings.Contains(m.HTML, `href="https://x/preferences?token=p"`) {
				t.Errorf("%s: no preferences link", k)
			}
		default:
			// Bulk mail: the footer's link opens the preference centre,
			// where one button leaves everything.
			if !strings.Contains(m.Text, "Unsubscribe or change what you get: "+d.PreferencesURL) ||
				!strings.Contains(m.HTML, `<a href="https://x/preferences?token=p">Unsubscribe or change what you get</a>`) {
				t.Errorf("%s: no visible unsubscribe link to the preference centre", k)
			}
			if !strings.Contains(m.Text, "You receive Weekly digest because") {
				t.Errorf("%s: the footer does not name the topic", k)
			}
		}
	}
	m, _ := r.Render(KindDigest, d)
	if !strings.Contains(m.HTML, "T &lt;1&gt;") {
		t.Fatal("HTML part does not escape item titles")
	}
	if _, err := r.Render("nope", d); err == nil {
		t.Fatal("unknown kind rendered")
	}
}

func TestRenderOverride(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "welcome.txt"), []byte(`{{define "subject"}}Custom hello{{end}}Hi {{.Email}}`), 0o644)
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := r.Render(KindWelcome, Data{Email: "a@b.co"})
	if m.Subject != "Custom hello" || m.Text != "Hi a@b.co" {
		t.Fatalf("override ignored: %q %q", m.Subject, m.Text)
	}
	os.WriteFile(filepath.Join(dir, "digest.txt"), []byte(`{{.Nope`), 0o644)
	if _, err := NewRenderer(dir); err == nil || !strings.Contains(err.Error(), "digest.txt") {
		t.Fatalf("broken override must name the file: %v", err)
	}
}

func TestMailboxPage(t *testing.T) {
	b := NewMailbox(2)
	for _, to := range []string{"1@x.io", "2@x.io", "3@x.io"} {
		b.Send(context.Background(), &Message{Kind: KindConfirm, To: to, Subject: "S " + to, Text: "open https://h/confirm?token=a&b=1 now"})
	}
	mails := b.Mails()
	if len(mails) != 2 || mails[0].To != "3@x.io" || mails[0].MessageID == "" {
		t.Fatalf("want the newest two, newest first: %+v", mails)
	}
	rec := httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest("GET", "/dev/mailbox", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `<a href="https://h/confirm?token=a&amp;b=1">`) {
		t.Fatalf("links are not clickable:\n%s", body)
	}
	if strings.Index(body, "3@x.io") > strings.Index(body, "2@x.io") {
		t.Fatal("not newest first")
	}
}

// The layout is fluid (a card of width 100% up to max-width 600 px, so a
// phone shows it whole: TestLayoutReadsOnAPhone measures it in Chromium);
// Outlook for Windows, which ignores max-width, gets a fixed 600 px table
// inside conditional comments that html/template would strip were they
// written in the template. No styles on <body>, which clients drop.
func TestLayoutIsFluidWithAFixedTableForOutlook(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render(KindDigest, Data{Email: "a@b.co", PreferencesURL: "https://x/p", Period: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.HTML, "<body>") || strings.Contains(m.HTML, "<body ") {
		t.Error("the body element carries attributes or styles")
	}
	if !strings.Contains(m.HTML, `style="width:100%;max-width:600px;`) {
		t.Error("no fluid card")
	}
	if strings.Contains(m.HTML, "width:560px") {
		t.Error("a fixed width outside Outlook's conditional comment")
	}
	if !strings.Contains(m.HTML, `<!--[if mso]><table role="presentation" width="600"`) || !strings.Contains(m.HTML, `<!--[if mso]></td></tr></table><![endif]-->`) {
		t.Error("no fixed-width table for Outlook")
	}
	if !strings.Contains(m.HTML, "@media only screen and (max-width:620px)") {
		t.Error("no rules for phones")
	}
}

// A sequence's step templates load beside the kinds; one missing is an
// error that names it, and one that exists only in the operator's folder
// is found there.
func TestStepTemplates(t *testing.T) {
	r, err := NewRenderer("", "welcome", "getting-started", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render("getting-started", Data{Email: "a@b.co", Name: "Ann", PreferencesURL: "https://x/p"})
	if err != nil || m.Subject != "Getting started with the newsletter" || !strings.Contains(m.Text, "Hello Ann,") {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := NewRenderer("", "welcome", "tips"); err == nil || !strings.Contains(err.Error(), "template tips.txt: not in NEWSLETTER_TEMPLATE_DIR") {
		t.Fatalf("missing step template: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tips.txt"), []byte(`{{define "subject"}}Tips{{end}}tips for {{.Email}}`), 0o644)
	if _, err := NewRenderer(dir, "tips"); err == nil || !strings.Contains(err.Error(), "tips.html") {
		t.Fatalf("step without its html: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "tips.html"), []byte(`{{define "body"}}<p>tips</p>{{end}}`), 0o644)
	r, err = NewRenderer(dir, "tips")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := r.Render("tips", Data{Email: "a@b.co"}); err != nil || m.Subject != "Tips" {
		t.Fatalf("%+v %v", m, err)
	}
}
