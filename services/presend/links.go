package presend

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
)

// The link checker's bounds (docs/security.md): a checked issue asks at
// most MaxLinks URLs, Parallel at a time, each (HEAD, then GET) within
// LinkTimeout, all within LinksBudget, reading at most linkBodyRead of
// an answer; a URL's answer is kept for LinkTTL, at most MaxCachedLinks
// of them.
const (
	MaxLinks       = 50
	Parallel       = 8
	LinkTimeout    = 5 * time.Second
	LinksBudget    = 15 * time.Second
	LinkTTL        = 10 * time.Minute
	MaxCachedLinks = 2048
	linkBodyRead   = 4 << 10
	linkRedirects  = 5
	// answerMargin is the part of a caller's remaining time kept to write
	// the answer after the links' checks.
	answerMargin = 250 * time.Millisecond
)

// LinkChecker asks each link of an issue whether it answers, from the
// server, through the SSRF guard: a link to a private address is not
// followed (Guard.AllowPrivate aside: tests and development).
type LinkChecker struct {
	client *http.Client
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]*list.Element // of *cachedLink, most recent in front
	order *list.List
}

type cachedLink struct {
	url string
	res linkAnswer
	at  time.Time
}

// linkAnswer is what one URL's check found: its level, and the message
// and fix a failing one shows.
type linkAnswer struct{ level, message, fix string }

// NewLinkChecker makes a checker whose every connection passes g.
func NewLinkChecker(g netguard.Guard) *LinkChecker {
	return &LinkChecker{client: g.Client(netguard.Limits{Timeout: LinkTimeout, FollowRedirects: linkRedirects}),
		now: time.Now, cache: map[string]*list.Element{}, order: list.New()}
}

// Check checks urls (the first MaxLinks), Parallel at a time: one result
// per link that fails, one ok result when all answer.
func (c *LinkChecker) Check(ctx context.Context, urls []string) []Result {
	var out []Result
	if len(urls) > MaxLinks {
		out = append(out, Result{Check: "links", Level: Warning,
			Message: fmt.Sprintf("The issue has %d links: only the first %d were checked.", len(urls), MaxLinks),
			Fix:     "Check the others by hand, or split the issue."})
		urls = urls[:MaxLinks]
	}
	budget := LinksBudget
	if b, ok := ctx.Value(linksBudgetKey{}).(time.Duration); ok && b < budget {
		budget = b
	}
	// Within the caller's own time (the API's request timeout, 5 s by
	// default), less a margin to write the answer: links not asked by
	// then are lines that say so, not a request cut off without them.
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - answerMargin; left < budget {
			budget = max(left, 0)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	answers := make([]linkAnswer, len(urls))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			answers[i] = c.answer(ctx, u, budget)
		})
	}
	wg.Wait()
	failed := 0
	for i, a := range answers {
		if a.level != OK {
			failed++
			out = append(out, Result{Check: "links", Level: a.level, Message: clip(urls[i], 120) + ": " + a.message, Fix: a.fix})
		}
	}
	if failed == 0 {
		out = append(out, Result{Check: "links", Level: OK, Message: fmt.Sprintf("Every link checked (%d) answers.", len(urls))})
	}
	return out
}

// linksBudgetKey carries a budget shorter than LinksBudget in a context
// (WithLinksBudget).
type linksBudgetKey struct{}

// WithLinksBudget bounds the link checks run with ctx to budget: a send
// checks its links within the request's own time (the API answers within
// 5 s), where LinksBudget would outlast it, so a slow link makes a
// warning there instead of a send answered 503. Answers cached by the
// preview's checks are used first, whatever the budget.
func WithLinksBudget(ctx context.Context, budget time.Duration) context.Context {
	return context.WithValue(ctx, linksBudgetKey{}, budget)
}

// answer is u's answer, from the cache while it is fresh.
func (c *LinkChecker) answer(ctx context.Context, u string, budget time.Duration) linkAnswer {
	if a, ok := c.cached(u); ok {
		return a
	}
	if ctx.Err() != nil {
		return linkAnswer{level: Warning, message: fmt.Sprintf("not checked: the links' check ran out of its %s.", budget),
			fix: "Preview again in a moment: the answers found so far are kept."}
	}
	a := c.probe(ctx, u)
	if ctx.Err() == nil {
		// A check cut short by its caller says nothing of the link.
		c.store(u, a)
	}
	return a
}

func (c *LinkChecker) cached(u string) (linkAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[u]
	if !ok {
		return linkAnswer{}, false
	}
	cl := e.Value.(*cachedLink)
	if c.now().Sub(cl.at) > LinkTTL {
		c.order.Remove(e)
		delete(c.cache, u)
		return linkAnswer{}, false
	}
	c.order.MoveToFront(e)
	return cl.res, true
}

func (c *LinkChecker) store(u string, a linkAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[u]; ok {
		c.order.Remove(e)
	}
	c.cache[u] = c.order.PushFront(&cachedLink{url: u, res: a, at: c.now()})
	for c.order.Len() > MaxCachedLinks {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.cache, last.Value.(*cachedLink).url)
	}
}

// probe asks u with HEAD, and with GET when HEAD is refused or fails (a
// server may not implement HEAD, or answer it wrongly).
func (c *LinkChecker) probe(ctx context.Context, u string) linkAnswer {
	ctx, cancel := context.WithTimeout(ctx, LinkTimeout)
	defer cancel()
	code, err := c.ask(ctx, http.MethodHead, u)
	if (err != nil && ctx.Err() == nil) || code >= 400 {
		head := code
		code, err = c.ask(ctx, http.MethodGet, u)
		if err != nil && head >= 400 && head != http.StatusMethodNotAllowed && head != http.StatusNotImplemented {
			// GET could not confirm HEAD's failure in time: HEAD's answer
			// stands, so a slow GET never turns a gone page into a
			// warning that lets a send through.
			return judge(head)
		}
	}
	if err != nil {
		return unreachable(err)
	}
	return judge(code)
}

func (c *LinkChecker) ask(ctx context.Context, method, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "newsletter-link-check")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	// A little of the body lets the connection be reused; the rest is
	// dropped with it.
	// A failure to read or close it costs the connection's reuse, not
	// the answer: the status came whole.
	_, _ = io.CopyN(io.Discard, resp.Body, linkBodyRead)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// judge is an HTTP answer's verdict: a page that is gone or broken is an
// error; one that asks for a login or turns robots away may well work
// for a reader, a warning; a redirect not followed (too many) too.
func judge(code int) linkAnswer {
	switch {
	case code < 300:
		return linkAnswer{level: OK}
	case code < 400:
		return linkAnswer{level: Warning, message: fmt.Sprintf("answers %d after %d redirects.", code, linkRedirects),
			fix: "Link to where it ends up."}
	case code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusTooManyRequests:
		return linkAnswer{level: Warning, message: fmt.Sprintf("answers %d %s to the server; a reader may see the page.", code, http.StatusText(code)),
			fix: "Open it in a browser to make sure."}
	}
	return linkAnswer{level: Error, message: fmt.Sprintf("answers %d %s.", code, http.StatusText(code)),
		fix: "Correct the link or remove it."}
}

// unreachable is a link the server could not ask: a warning that says
// why, since the server's own network (no DNS, no way out, the SSRF
// guard) may be the cause rather than the link.
func unreachable(err error) linkAnswer {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, netguard.ErrPrivate):
		return linkAnswer{level: Warning, message: "points at a private or local address, which the server does not call (SSRF guard): not checked.",
			fix: "Readers outside your network cannot open it either: link to a public address."}
	case errors.As(err, &dns):
		return linkAnswer{level: Warning, message: "its host could not be resolved from the server (no DNS, or no such name): not checked.",
			fix: "Check the host's spelling, and open it in a browser."}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return linkAnswer{level: Warning, message: fmt.Sprintf("did not answer the server within %s: not checked.", LinkTimeout),
			fix: "Open it in a browser: the site may be slow, or the server may have no way out."}
	}
	return linkAnswer{level: Warning, message: "could not be reached from the server (" + clip(err.Error(), 160) + "): not checked.",
		fix: "Open it in a browser: the server may have no network, or the site may be down."}
}
