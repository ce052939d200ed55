// Package clientip says which client a request comes from, for per-client
// limits. Behind a reverse proxy every request arrives from the proxy, so
// the proxies named in NEWSLETTER_TRUSTED_PROXIES are looked through: the
// client is the right-most X-Forwarded-For hop that is not one of them
// (hops further left were written by the client and prove nothing). An
// IPv6 client is keyed by its /64, which one host can rotate through.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds a request's client.
type Resolver struct{ trusted []netip.Prefix }

// Parse reads a comma-separated list of CIDRs (or single addresses) of
// trusted proxies; empty trusts none.
func Parse(list string) (Resolver, error) {
	var r Resolver
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return Resolver{}, fmt.Errorf("%q is not a CIDR or an address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
}

func (r Resolver) trusts(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// Key is the client's key for rate limits: its address, or its /64 for
// IPv6.
func (r Resolver) Key(req *http.Request) string {
	a := r.Addr(req)
	if !a.IsValid() {
		return req.RemoteAddr
	}
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// Addr is the client's address.
func (r Resolver) Addr(req *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap()
	if !r.trusts(a) {
		return a
	}
	hops := strings.Split(strings.Join(req.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a hop we cannot read: stop at the last one we could
		}
		a = h.Unmap()
		if !r.trusts(a) {
			break
		}
	}
	return a
}
