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
		Period: "2026-W49", Entries: []Entry{{Title: "T <1>", URL: "https://x/1", Summary: "S"}}}
	for _, k := range Kinds() {
		m, err := r.Render(k, d)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if m.Subject == "" || m.Text == "" || !strings.Contains(m.HTML, "<html") {
			t.Fatalf("%s: incomplete %+v", k, m)
		}
		if k != KindConfirm && (!strings.Contains(m.Text, d.UnsubscribeURL) || !strings.Contains(m.HTML, `href="https://x/unsubscribe?token=u"`)) {
			t.Errorf("%s: no visible unsubscribe link", k)
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
