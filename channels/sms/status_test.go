package sms

import "testing"

// A status callback retires its number only for a failed or undelivered
// message with a permanent code; a passing code, or a permanent code on
// another status, does not.
func TestRetireStatus(t *testing.T) {
	for _, c := range []struct {
		status, code string
		want         bool
	}{
		{"undelivered", "30006", true}, {"failed", "30005", true}, {"failed", "21211", true},
		{"failed", "21610", true}, {"failed", "21614", true},
		{"undelivered", "30003", false}, {"undelivered", "30001", false}, {"failed", "30008", false},
		{"undelivered", "30007", false}, {"undelivered", "30004", false}, {"failed", "", false},
		{"sent", "30006", false}, {"delivered", "30006", false}, {"queued", "", false},
	} {
		if got := RetireStatus(c.status, c.code); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.status, c.code, got, c.want)
		}
	}
}
