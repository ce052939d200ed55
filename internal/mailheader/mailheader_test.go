package mailheader

import "testing"

func TestFieldLen(t *testing.T) {
	for in, want := range map[string]int{
		"":                                   0,
		"Subject: hi\r\n":                    13,
		"Subject: hi\r\nTo: a@x.io\r\n":      13,
		"Subject: hi\r\n there\r\nTo: a\r\n": 21,
		"Subject: hi\r\n\tthere\r\n":         21,
		"Subject: hi":                        11,
		"Subject: hi\r\n\r\nbody":            13,
		"Subject: hi\r\n there":              19,
	} {
		if got := FieldLen([]byte(in)); got != want {
			t.Errorf("FieldLen(%q) = %d, want %d", in, got, want)
		}
	}
}
