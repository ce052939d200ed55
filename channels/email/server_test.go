package email

import "testing"

func TestParseServerURL(t *testing.T) {
	s, err := ParseServerURL("smtp://u:p%40ss@mail.example.com:2525?tls=none")
	if err != nil || s.Host != "mail.example.com" || s.Port != 2525 || s.Username != "u" || s.Password != "p@ss" || s.TLS != "none" {
		t.Fatalf("%+v %v", s, err)
	}
	if s, _ := ParseServerURL("smtp://mail.example.com"); s.Port != 587 || s.TLS != "starttls" {
		t.Fatalf("defaults: %+v", s)
	}
	if s, _ := ParseServerURL("smtps://mail.example.com"); s.Port != 465 || s.TLS != "tls" {
		t.Fatalf("smtps defaults: %+v", s)
	}
	for _, bad := range []string{"smtp://h?tls=maybe", "http://h", "smtp://", "smtp://h:0", "smtp://h:99999"} {
		if _, err := ParseServerURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
