package mailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shortMails are the shortest mail of every kind a reader can get, with
// the newsletter's logo: the kinds, a sequence step written in the
// console, an issue of one line and the console's invite.
func shortMails(t *testing.T) map[string]*Message {
	t.Helper()
	step, err := StepTemplate("Day two", "Hello {{.Name}}, here is the second tip.")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compile(Sources{Stored: map[string]TemplateText{"step-2": step}}, "step-2")
	if err != nil {
		t.Fatal(err)
	}
	body, err := RenderMarkdown("A short one this week: [the release notes](https://example.org/notes).")
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Email: "reader@example.org", Name: "Ann", ConfirmURL: "https://news.example.com/confirm?token=c",
		UnsubscribeURL: "https://news.example.com/unsubscribe?token=u", PreferencesURL: "https://news.example.com/preferences?token=p",
		Topic: "Weekly digest", Period: "2026-W49", Entries: []Entry{{Title: "One", URL: "https://example.org/1"}},
		Subject: "Issue one", Preheader: "A short one", IssueHTML: body.HTML, IssueText: body.Text,
		Newsletter: Newsletter{Name: "Example News", LogoURL: "https://news.example.com/logo.png", PostalAddress: "1 Main St, Springfield"}}
	out := map[string]*Message{}
	for _, k := range append(Kinds(), "step-2") {
		m, err := r.Render(k, d)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = m
	}
	inv, err := r.Invite("new@example.org", Invite{By: "ann", Role: "editor", Link: "https://news.example.com/admin/invite?token=i",
		Expires: "2026-12-09 10:00 UTC"}, d.Newsletter)
	if err != nil {
		t.Fatal(err)
	}
	out[KindInvite] = inv
	return out
}

// htmlImageOnlyMax is the top of SpamAssassin's HTML_IMAGE_ONLY_* ranges
// (20_html_tests.cf: html_image_only('2800','3200')): an HTML part
// with an <img> and at most this many bytes scores up to 2.8 points.
// SpamAssassin counts the raw HTML it parses (HTML.pm: length += the
// part's length), markup and styles included, not only its words.
const htmlImageOnlyMax = 3200

// TestShortMailsAreNotImageOnly: no mail with the logo is short enough
// for HTML_IMAGE_ONLY_*: each kind's HTML part, the shortest it gets, is
// over the rule's top range. With NEWSLETTER_DUMP_EML=dir set, the mails
// are written there as .eml, to score them by hand (spamassassin -t).
func TestShortMailsAreNotImageOnly(t *testing.T) {
	mails := shortMails(t)
	dump := os.Getenv("NEWSLETTER_DUMP_EML")
	for kind, m := range mails {
		if !strings.Contains(m.HTML, "<img") {
			t.Errorf("%s: the logo is not in the mail", kind)
		}
		if n := len(m.HTML); n <= htmlImageOnlyMax {
			t.Errorf("%s: the HTML part is %d bytes with an image: HTML_IMAGE_ONLY fires up to %d", kind, n, htmlImageOnlyMax)
		}
		if dump != "" {
			s, err := NewSMTP(SMTPOptions{Server: Server{Host: "composer.invalid", Port: 25, TLS: "none"}, From: "Example News <news@example.com>"})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			m.To = "reader@example.org"
			b, err := s.Compose(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dump, kind+".eml"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestEveryMailShowsThePostalAddress: the text part of every kind, the
// confirmation and the unsubscribe link mailed on request too, carries
// the newsletter's postal address, as its HTML part does.
func TestEveryMailShowsThePostalAddress(t *testing.T) {
	for kind, m := range shortMails(t) {
		for part, s := range map[string]string{"text": m.Text, "html": m.HTML} {
			if !strings.Contains(s, "1 Main St, Springfield") {
				t.Errorf("%s: the %s part lacks the postal address", kind, part)
			}
		}
	}
}

// TestPreheaderIsTheFirstText: an issue's preheader is the first text of
// the HTML body, before the logo's newsletter name, so an inbox
// previews it and not the name.
func TestPreheaderIsTheFirstText(t *testing.T) {
	m := shortMails(t)[KindIssue]
	body := m.HTML[strings.Index(m.HTML, "<body>"):]
	pre, name := strings.Index(body, ">A short one</div>"), strings.Index(body, "Example News")
	if pre < 0 || name < 0 || pre > name || strings.Contains(body[:pre], "<img") {
		t.Fatalf("the preheader (at %d) does not come before the logo and the name (at %d):\n%s", pre, name, body)
	}
}
