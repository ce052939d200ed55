package clientip

import (
	"net/http/httptest"
	"testing"
)

func TestKey(t *testing.T) {
	r, err := Parse("10.0.0.0/8, 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		remote, xff, want string
	}{
		// No proxy in between: the forwarded header is the client's own
		// word and is ignored.
		{"203.0.113.5:1234", "198.51.100.1", "203.0.113.5"},
		// Through a trusted proxy: the right-most hop it did not add.
		{"10.1.2.3:1234", "198.51.100.1, 203.0.113.9", "203.0.113.9"},
		{"192.0.2.7:1234", "198.51.100.1, 203.0.113.9, 10.9.9.9", "203.0.113.9"},
		// A spoofed left-most hop changes nothing.
		{"10.1.2.3:1234", "1.2.3.4, 203.0.113.9", "203.0.113.9"},
		// IPv6 clients by /64.
		{"[2001:db8:1:2:3:4:5:6]:1234", "", "2001:db8:1:2::/64"},
		{"10.1.2.3:1234", "2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
	}
	for _, c := range cases {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = c.remote
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := r.Key(req); got != c.want {
			t.Errorf("%s via %q: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
	if _, err := Parse("10.0.0.0/33"); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
}
