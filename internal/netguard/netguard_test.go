package netguard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8":          true,
		"2606:4700::1111":  true,
		"127.0.0.1":        false,
		"::1":              false,
		"10.1.2.3":         false,
		"172.16.0.1":       false,
		"192.168.1.1":      false,
		"169.254.169.254":  false, // cloud metadata
		"100.64.0.1":       false,
		"0.0.0.0":          false,
		"::":               false,
		"fe80::1":          false,
		"fd00::1":          false,
		"::ffff:127.0.0.1": false,
		"::ffff:8.8.8.8":   true,
		"64:ff9b::7f00:1":  false,
		"64:ff9b::808:808": true,
		"224.0.0.1":        false,
		"255.255.255.255":  false,
		"192.0.2.10":       false,
		"2001:db8::1":      false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// embedsLoopback are IPv6 forms that carry 127.0.0.1 (or, for Teredo, a
// client at 127.0.0.1): the network may deliver each to this machine.
var embedsLoopback = map[string]string{
	"IPv4-compatible":      "::127.0.0.1",
	"IPv4-mapped":          "::ffff:127.0.0.1",
	"IPv4-translated":      "::ffff:0:127.0.0.1",
	"NAT64 well-known":     "64:ff9b::7f00:1",
	"NAT64 local-use":      "64:ff9b:1::7f00:1",
	"6to4":                 "2002:7f00:1::1",
	"Teredo client":        "2001:0:4136:e378:8000:63bf:80ff:fffe", // client bits inverted: 127.0.0.1
	"Teredo private relay": "2001:0:a00:1:8000:63bf:f7f7:f7f7",     // server 10.0.0.1
}

func TestPublicUnwrapsEmbeddedIPv4(t *testing.T) {
	for form, addr := range embedsLoopback {
		if Public(netip.MustParseAddr(addr)) {
			t.Errorf("%s %s judged public", form, addr)
		}
	}
	for addr, want := range map[string]bool{
		"::8.8.8.8":                            true,
		"::ffff:0:8.8.8.8":                     true,
		"64:ff9b::808:808":                     true,
		"64:ff9b:1::808:808":                   true,
		"64:ff9b:1:1::808:808":                 false, // a prefix length only the operator knows
		"2002:808:808::1":                      true,
		"2002:a00:1::1":                        false, // 10.0.0.1
		"2002:a9fe:a9fe::1":                    false, // 169.254.169.254
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7": true,  // client 8.8.8.8
		"2001:0:4136:e378:8000:63bf:f5ff:fffe": false, // client 10.0.0.1
		"64:ff9b::a9fe:a9fe":                   false,
		"::10.0.0.1":                           false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// Each embedded form is refused at registration (the URL check) and at
// connect time (the dialer's Control hook), the two roads to a request.
func TestEmbeddedIPv4RefusedAtRegistrationAndConnect(t *testing.T) {
	var g Guard
	for form, addr := range embedsLoopback {
		if _, err := g.CheckURL(context.Background(), "https://["+addr+"]/hook"); !errors.Is(err, ErrPrivate) {
			t.Errorf("%s: CheckURL(https://[%s]/hook) = %v, want ErrPrivate", form, addr, err)
		}
		if err := g.Control("tcp6", "["+addr+"]:443", nil); !errors.Is(err, ErrPrivate) {
			t.Errorf("%s: Control(tcp6, [%s]:443) = %v, want ErrPrivate", form, addr, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	var g Guard
	for _, bad := range []string{
		"http://8.8.8.8/hook",            // not https
		"https://127.0.0.1/hook",         // loopback
		"https://[::1]/hook",             // loopback v6
		"https://169.254.169.254/latest", // link-local
		"https://localhost/hook",         // resolves to loopback
		"https://user:pw@8.8.8.8/hook",   // credentials
		"ftp://8.8.8.8/",
		"https:///nohost",
		"not a url\x7f",
	} {
		if _, err := g.CheckURL(ctx, bad); err == nil {
			t.Errorf("CheckURL(%q) accepted", bad)
		}
	}
	if _, err := g.CheckURL(ctx, "https://8.8.8.8/hook"); err != nil {
		t.Errorf("a public literal address: %v", err)
	}
	allow := Guard{AllowPrivate: true}
	if _, err := allow.CheckURL(ctx, "http://127.0.0.1:9/hook"); err != nil {
		t.Errorf("with private allowed: %v", err)
	}
}

// The connect-time check is what stops a name that resolved publicly at
// registration and privately later: the client refuses loopback however it
// was reached.
func TestClientRefusesPrivateAtConnect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	var g Guard
	_, err := g.Client(Limits{Timeout: 5 * time.Second}).Get(srv.URL)
	if err == nil || !errors.Is(err, ErrPrivate) {
		t.Fatalf("GET %s through the guard: err = %v, want ErrPrivate", srv.URL, err)
	}
	allowed := Guard{AllowPrivate: true}
	resp, err := allowed.Client(Limits{Timeout: 5 * time.Second}).Get(srv.URL)
	if err != nil {
		t.Fatalf("with private allowed: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || string(body) != "ok" {
		t.Fatalf("body %q, err %v", body, err)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var followed bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/elsewhere") {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	g := Guard{AllowPrivate: true}
	resp, err := g.Client(Limits{Timeout: 5 * time.Second}).Get(srv.URL + "/hook")
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || followed {
		t.Fatalf("status %d, followed %v: a redirect must be answered, not followed", resp.StatusCode, followed)
	}
}

func TestReadLimited(t *testing.T) {
	got, err := ReadLimited(strings.NewReader(strings.Repeat("x", 100)), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("read %d bytes, want 10", len(got))
	}
}
