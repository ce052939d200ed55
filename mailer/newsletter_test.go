package mailer

import (
	"strings"
	"testing"
)

// TestMailCarriesTheNewsletter: the settings reach every part of a mail:
// the logo (nl-logo, alt = name) and name at the top, links in the
// accent colour, the postal address in both footers, the welcome's
// subject, and From and Reply-To in the header.
func TestMailCarriesTheNewsletter(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Email: "ann@example.org", PreferencesURL: "https://news.example.com/preferences?token=t",
		UnsubscribeURL: "https://news.example.com/unsubscribe?token=t",
		Newsletter: Newsletter{Name: "Café Weekly", LogoURL: "https://example.com/logo.png", Accent: "#aa3300",
			PostalAddress: "1 Bean Street, Roastville", From: "Café Weekly <weekly@example.com>", ReplyTo: "editor@example.com"}}
	msg, err := r.Render(KindWelcome, d)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "Welcome to Café Weekly" {
		t.Errorf("subject %q", msg.Subject)
	}
	for _, want := range []string{`<img class="nl-logo" src="https://example.com/logo.png" alt="Café Weekly"`, `>Café Weekly</p>`,
		`.nl-body a{color:#aa3300}`, `color:#aa3300`, `1 Bean Street, Roastville`} {
		if !strings.Contains(msg.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if !strings.Contains(msg.Text, "1 Bean Street, Roastville") {
		t.Errorf("text lacks the postal address:\n%s", msg.Text)
	}
	s, err := NewSMTP(SMTPOptions{Server: Server{Host: "smtp.invalid", Port: 25, TLS: "none"}, From: "Configured <news@example.com>"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	env, data, err := s.message(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	head := string(data[:strings.Index(string(data), "\r\n\r\n")])
	if !strings.Contains(head, "From: =?UTF-8?q?Caf=C3=A9_Weekly?= <weekly@example.com>") && !strings.Contains(head, "From: =?utf-8?q?Caf=C3=A9_Weekly?= <weekly@example.com>") {
		t.Errorf("From is not the settings':\n%s", head)
	}
	if !strings.Contains(head, "Reply-To: <editor@example.com>") {
		t.Errorf("no Reply-To:\n%s", head)
	}
	if env.from != "weekly@example.com" {
		t.Errorf("envelope sender %q", env.from)
	}

	// Without settings, nothing of them shows and the sender's From stays.
	plain, err := r.Render(KindWelcome, Data{Email: "ann@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.HTML, "nl-logo\" src") || plain.Subject != "Welcome to the newsletter" {
		t.Errorf("an unset newsletter shows: %q", plain.Subject)
	}
	_, data, err = s.message(plain, nil)
	if err != nil || !strings.Contains(string(data), "From: \"Configured\" <news@example.com>") {
		t.Errorf("the configured From: %v\n%.300s", err, data)
	}
}
