package engage

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// The one place that says which requests are machines': link scanners
// (mail security gateways that follow every link of a mail on delivery)
// and mail-privacy proxies (that load every image of a mail, opened or
// not). Their clicks and opens are counted apart, never as readers'.

// scannerAgents are parts of the User-Agent of known link scanners and
// of HTTP libraries no person clicks with (lower case).
var scannerAgents = []string{
	"barracuda", "proofpoint", "mimecast", "messagelabs", "symantec", "forcepoint",
	"trendmicro", "trend micro", "sophos", "fireeye", "trellix", "paloalto", "zscaler",
	"cisco", "ironport", "fortinet", "fortiguard", "checkpoint", "spamhaus", "vade",
	"bot", "crawler", "spider", "scanner", "preview", "headlesschrome", "phantomjs",
	"python-requests", "python-urllib", "curl/", "wget/", "go-http-client", "java/", "okhttp",
	"libwww", "httpclient", "axios/", "node-fetch",
}

// proxyAgents are parts of the User-Agent of the image proxies of mail
// providers (lower case): an open through one was not seen by a person.
var proxyAgents = []string{"googleimageproxy", "yahoomailproxy", "ymailproxy", "outlook-image-proxy"}

// appleProxyAgent is the User-Agent of Apple Mail Privacy Protection's
// image loads: a Mac's WebKit without the "Version/… Safari" a browser
// adds. It loads every image of every mail, opened or not.
const appleProxyAgent = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"

// proxyNets are networks whose image loads are machine opens: Apple's own
// network (17.0.0.0/8), from which Mail Privacy Protection loads images.
var proxyNets = []netip.Prefix{netip.MustParsePrefix("17.0.0.0/8")}

// EarlyClick is how soon after its mail a click is taken for a scanner's:
// a security gateway follows the links as the mail arrives; a person
// takes longer to open it and read.
const EarlyClick = 10 * time.Second

// HoneypotWindow is how long a reader's links of an issue count as a
// machine's once its hidden link was followed.
const HoneypotWindow = 10 * time.Minute

// Classifier tells machine requests from people's.
type Classifier struct {
	// ScannerNets are the networks of link scanners (the operator's list,
	// NEWSLETTER_ENGAGEMENT_SCANNER_NETS): everything from them is a
	// machine's.
	ScannerNets []netip.Prefix
	// Addr is a request's client address (behind trusted proxies);
	// nil: the connection's.
	Addr func(*http.Request) netip.Addr

	honeypot marks
}

// scannerAgent tells a scanner's or library's User-Agent (and none).
func scannerAgent(ua string) bool {
	if strings.TrimSpace(ua) == "" {
		return true
	}
	l := strings.ToLower(ua)
	for _, s := range scannerAgents {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func (c *Classifier) addr(r *http.Request) netip.Addr {
	if c.Addr != nil {
		return c.Addr(r)
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func inNets(a netip.Addr, nets []netip.Prefix) bool {
	for _, n := range nets {
		if a.IsValid() && n.Contains(a) {
			return true
		}
	}
	return false
}

// Click tells a machine's click: a HEAD request, a scanner's agent or
// network, a click within EarlyClick of the mail, or one of a reader
// whose honeypot link was followed within HoneypotWindow.
func (c *Classifier) Click(r *http.Request, k Click, readerHash string, now time.Time) bool {
	return r.Method == http.MethodHead || scannerAgent(r.UserAgent()) || now.Sub(k.Sent) < EarlyClick ||
		inNets(c.addr(r), c.ScannerNets) || c.honeypot.marked(k.Issue, readerHash, now)
}

// Open tells a machine's open: a proxy's or a scanner's.
func (c *Classifier) Open(r *http.Request, k Click, readerHash string, now time.Time) bool {
	ua := r.UserAgent()
	if ua == appleProxyAgent || inNets(c.addr(r), proxyNets) {
		return true
	}
	l := strings.ToLower(ua)
	for _, s := range proxyAgents {
		if strings.Contains(l, s) {
			return true
		}
	}
	return c.Click(r, k, readerHash, now)
}

// Honeypot marks the reader's mail of the issue as a scanner's for
// HoneypotWindow.
func (c *Classifier) Honeypot(issue int64, readerHash string, now time.Time) {
	c.honeypot.mark(issue, readerHash, now.Add(HoneypotWindow))
}

// maxMarks bounds the honeypot marks kept (a flood of honeypot clicks
// costs memory up to here; past it, the oldest are forgotten).
const maxMarks = 100_000

// marks are the honeypot marks of this process. With several API
// processes a mark is only the one's that took the honeypot click: a
// scanner's other clicks usually come from the same burst, and its early
// clicks are caught by EarlyClick anyway.
type marks struct {
	mu    sync.Mutex
	until map[markKey]time.Time
}

type markKey struct {
	issue  int64
	reader string
}

func (m *marks) mark(issue int64, reader string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[markKey]time.Time{}
	}
	if len(m.until) >= maxMarks {
		now := until.Add(-HoneypotWindow)
		for k, u := range m.until {
			if !u.After(now) {
				delete(m.until, k)
			}
		}
		for k := range m.until {
			if len(m.until) < maxMarks {
				break
			}
			delete(m.until, k)
		}
	}
	m.until[markKey{issue, reader}] = until
}

func (m *marks) marked(issue int64, reader string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.until[markKey{issue, reader}]
	return ok && now.Before(u)
}
