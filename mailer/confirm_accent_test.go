package mailer

import (
	htmltemplate "html/template"
	"strings"
	"testing"
)

// TestConfirmButtonTakesTheAccent: the confirmation's button is the
// newsletter's accent colour from the settings; without one, the
// built-in blue.
func TestConfirmButtonTakesTheAccent(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	for accent, want := range map[string]string{"#aa3300": "background:#aa3300;", "": "background:#1d4ed8;"} {
		d := Data{Email: "ann@example.org", ConfirmURL: "https://news.example.com/confirm?token=t",
			Newsletter: Newsletter{Name: "Café Weekly", Accent: htmltemplate.CSS(accent)}}
		msg, err := r.Render(KindConfirm, d)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(msg.HTML, ">Confirm subscription</a>")
		if i < 0 {
			t.Fatalf("no button in:\n%s", msg.HTML)
		}
		button := msg.HTML[strings.LastIndex(msg.HTML[:i], "<a "):i]
		if !strings.Contains(button, want) {
			t.Errorf("accent %q: the button %s lacks %q", accent, button, want)
		}
	}
}
