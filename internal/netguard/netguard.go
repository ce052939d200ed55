package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrPrivate is returned (wrapped) when an address is loopback, private,
// link-local or otherwise not a public unicast address.
var ErrPrivate = errors.New("address is not public")

// Guard decides which endpoints may be called. The zero Guard refuses
// private addresses and plain http.
type Guard struct {
	// AllowPrivate lets loopback and private addresses and plain http
	// through (NEWSLETTER_WEBHOOK_ALLOW_PRIVATE: tests and development).
	AllowPrivate bool
	// Resolver looks names up; nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// CheckURL says whether raw may be registered as an endpoint: an absolute
// https URL (http too when private addresses are allowed) without user
// information, whose host resolves only to public addresses.
func (g Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowPrivate:
	default:
		return nil, fmt.Errorf("%q: the URL must start with https://", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%q: the URL has no host", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q: the URL must not carry a user or password", raw)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%q: the URL must not carry a fragment", raw)
	}
	if g.AllowPrivate {
		return u, nil
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return nil, fmt.Errorf("%q: %s: %w", raw, a, ErrPrivate)
		}
		return u, nil
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%q: cannot resolve %s: %w", raw, host, err)
	}
	for _, a := range addrs {
		if !Public(a) {
			return nil, fmt.Errorf("%q: %s resolves to %s: %w", raw, host, a, ErrPrivate)
		}
	}
	return u, nil
}

func (g Guard) resolver() *net.Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// Control is a net.Dialer Control hook that refuses to connect to a
// non-public address unless private addresses are allowed.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: %s %q: %w", network, address, err)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("netguard: refusing to connect to %s: %w", ap.Addr(), ErrPrivate)
	}
	return nil
}

// Limits bound what one outgoing request may cost.
type Limits struct {
	// Timeout is the whole request's budget (connect, TLS, answer).
	Timeout time.Duration
	// MaxResponse is how much of an answer's body is read at most; the
	// rest is discarded (see LimitBody).
	MaxResponse int64
}

// Client returns an HTTP client whose every connection passes Control,
// which never follows redirects (a redirect could point anywhere; the
// endpoint's own answer is what counts), and which gives up after the
// limits' timeout.
func (g Guard) Client(l Limits) *http.Client {
	dialer := &net.Dialer{Timeout: l.Timeout, Control: g.Control}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us and defeat Control
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   l.Timeout,
		ResponseHeaderTimeout: l.Timeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   l.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Public reports whether a is a global unicast address that is not
// loopback, private (RFC 1918, RFC 4193), link-local, CGNAT (RFC 6598),
// unspecified, multicast, or an IPv4 address mapped or translated into
// IPv6 that is itself not public.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() {
		// NAT64 (64:ff9b::/96) embeds an IPv4 address: judge that one.
		if nat64.Contains(a) {
			b := a.As16()
			return Public(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var (
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// reserved are ranges that IsGlobalUnicast accepts but that are not
	// reachable public hosts.
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),  // documentation
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("240.0.0.0/4"),
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("fec0::/10"),     // site-local (deprecated)
	}
)
