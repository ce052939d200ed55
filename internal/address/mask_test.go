package address

import "testing"

func TestMasked(t *testing.T) {
	for in, want := range map[string]string{
		"jane@example.com":       "j***@e***.com",
		"j@e.com":                "j***@e***.com",
		"élodie@mail.example.fr": "é***@m***.fr",
		"root@localhost":         "r***@l***",
		"":                       "***",
	} {
		if got := Masked(in); got != want {
			t.Errorf("Masked(%q) = %q, want %q", in, got, want)
		}
	}
}
