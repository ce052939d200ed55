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
	if err := g.checkHost(ctx, u.Hostname()); err != nil {
		return nil, fmt.Errorf("%q: %w", raw, err)
	}
	return u, nil
}

// CheckRedirect says whether a redirect to u may be followed: an http(s)
// URL without user information whose host resolves only to public
// addresses (any, when private addresses are allowed). The dialer judges
// the connection again; this check gives the clear reason first.
func (g Guard) CheckRedirect(ctx context.Context, u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("redirect to %q: not an http(s) URL", u.Redacted())
	}
	if u.User != nil {
		return fmt.Errorf("redirect to %q: the URL must not carry a user or password", u.Redacted())
	}
	if u.Hostname() == "" {
		return fmt.Errorf("redirect to %q: the URL has no host", u.Redacted())
	}
	if err := g.checkHost(ctx, u.Hostname()); err != nil {
		return fmt.Errorf("redirect to %q: %w", u.Redacted(), err)
	}
	return nil
}

// checkHost says whether host, a literal address or a name, is public
// (every address the name resolves to), unless private ones are allowed.
func (g Guard) checkHost(ctx context.Context, host string) error {
	if g.AllowPrivate {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return fmt.Errorf("%s: %w", a, ErrPrivate)
		}
		return nil
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("cannot resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if !Public(a) {
			return fmt.Errorf("%s resolves to %s: %w", host, a, ErrPrivate)
		}
	}
	return nil
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
	// FollowRedirects is how many redirects a request follows, each
	// target passing CheckRedirect (0: none; the redirect is the answer).
	FollowRedirects int
}

// Client returns an HTTP client whose every connection passes Control,
// which follows no redirect unless the limits say so (a redirect could
// point anywhere: each followed one is checked as a URL and dialled
// through Control), and which gives up after the limits' timeout.
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
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if l.FollowRedirects <= 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > l.FollowRedirects {
				return fmt.Errorf("stopped after %d redirects", l.FollowRedirects)
			}
			return g.CheckRedirect(req.Context(), req.URL)
		},
	}
}

// Public reports whether a is a global unicast address that is not
// loopback, private (RFC 1918, RFC 4193), link-local, CGNAT (RFC 6598),
// unspecified, multicast or otherwise reserved. An IPv6 address that
// carries an IPv4 address (mapped, compatible, translated, NAT64, 6to4,
// Teredo) is judged by the IPv4 addresses it carries: the network may
// deliver it to that IPv4 host, so [64:ff9b::7f00:1] is 127.0.0.1.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() {
		return false
	}
	if a.Is6() {
		inner, known := embeddedIPv4(a)
		if !known {
			return false
		}
		for _, v4 := range inner {
			if !Public(v4) {
				return false
			}
		}
	}
	if a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
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

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries by one
// of the standard embeddings, none for an ordinary IPv6 address. known is
// false for an address whose embedding cannot be read without the
// network's configuration (see nat64Local): such an address is refused.
func embeddedIPv4(a netip.Addr) (inner []netip.Addr, known bool) {
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case compatible.Contains(a), translated.Contains(a), nat64.Contains(a):
		// ::a.b.c.d (RFC 4291, deprecated but still routed by some
		// stacks), ::ffff:0:a.b.c.d (SIIT, RFC 2765) and the well-known
		// NAT64 prefix, which RFC 6052 allows only as a /96.
		return []netip.Addr{last}, true
	case nat64Local.Contains(a):
		// RFC 8215's local-use prefix: the operator picks the prefix
		// length (/48 to /96), which moves the IPv4 address. Only the
		// /96 form (bits 48 to 95 zero) can be read without knowing it.
		for _, x := range b[6:12] {
			if x != 0 {
				return nil, false
			}
		}
		return []netip.Addr{last}, true
	case sixToFour.Contains(a):
		// 2002:AABB:CCDD::/48 routes to the IPv4 host AA.BB.CC.DD (RFC 3056).
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}, true
	case teredo.Contains(a):
		// 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC: the Teredo server, and the
		// client's address with its bits inverted (RFC 4380).
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}, true
	}
	return nil, true
}

var (
	// The IPv6 ranges that carry an IPv4 address (see embeddedIPv4).
	compatible = netip.MustParsePrefix("::/96")
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
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
