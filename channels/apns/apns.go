package apns

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/h2client"
)

// DefaultBaseURL is APNs' production origin; the sandbox's (for
// development builds of the app) is https://api.sandbox.push.apple.com.
const DefaultBaseURL = "https://api.push.apple.com"

// A provider token is reused for tokenRefresh: Apple takes one up to an
// hour old and answers updates more often than every 20 minutes with 429
// TooManyProviderTokenUpdates, so 50 minutes leaves room for clock skew
// both ways. An ExpiredProviderToken answer mints a new one only once the
// token is tokenMinAge old; a younger one is a pause (Apple's clock is
// far ahead of ours, or it is still refusing the last update).
const (
	tokenRefresh = 50 * time.Minute
	tokenMinAge  = 20 * time.Minute
)

// maxAnswer is how much of an answer's body is read.
const maxAnswer = 4096

// MaxPayload is the largest payload APNs takes for an alert (4 KB; a
// larger one is answered 413 PayloadTooLarge).
const MaxPayload = 4096

// DefaultMaxStreams is how many requests a Client has in flight at once
// unless told (Client.MaxStreams). Apple says not to assume a number of
// streams: it varies with APNs' load, and APNs advertises it in its
// SETTINGS_MAX_CONCURRENT_STREAMS (some 1000 once a provider token is
// taken). 500 stays under what it has advertised, so one connection
// carries them; past what APNs allows at the time, net/http opens a
// second connection rather than fail, which Apple allows.
const DefaultMaxStreams = 500

// Notification is one mobile notification: a title, a line of text, and
// the page (or deep link) a tap opens, sent as the payload's "url" key. It
// has the fields of fcm.Notification, so one converts to the other.
type Notification struct {
	Title string
	Body  string
	URL   string
	// TTL is how long APNs keeps the message for a device that is offline
	// (apns-expiration); 0 means push.DefaultTTL.
	TTL time.Duration
}

// Client sends through APNs with one team's auth key to one app (Topic,
// its bundle id). Set its fields before the first Send and not after; it
// is then safe for concurrent use.
type Client struct {
	Key    *ecdsa.PrivateKey
	KeyID  string
	TeamID string
	Topic  string
	// BaseURL is APNs' origin; empty means DefaultBaseURL.
	BaseURL string
	// HTTP must speak HTTP/2; nil means NewHTTPClient(nil), made once.
	HTTP *http.Client
	// MaxStreams is the most requests the client has in flight at once,
	// every caller's together: the streams of its one HTTP/2 connection
	// (0: DefaultMaxStreams). A Send past it waits for a stream, or for
	// its context.
	MaxStreams int

	mu       sync.Mutex
	now      func() time.Time // the clock, for tests; nil means time.Now
	client   *http.Client     // HTTP or the default
	token    string           // the provider token, "" until signed
	signedAt time.Time
	streams  chan struct{} // MaxStreams slots, made on first use
	waiting  atomic.Int32  // sends waiting for a stream (for tests)
	first    chan struct{} // one slot: the requests before APNs took a token
	warm     bool          // APNs has answered a request past its token check
}

// NewHTTPClient is an HTTP client for APNs (h2client.New): HTTP/2 over
// TLS (trusting rootCAs, or the system's roots when nil), one connection
// carrying every concurrent request (see the package doc), a 30-second
// timeout a request, and HTTP/2 pings to find a connection that died quietly.
func NewHTTPClient(rootCAs *x509.CertPool) *http.Client {
	return h2client.New(rootCAs, 30*time.Second)
}

// Send posts n to the app install with deviceToken. nil means APNs took
// the message; see the package doc for the errors.
func (c *Client) Send(ctx context.Context, deviceToken string, n Notification) error {
	if err := ValidToken(deviceToken); err != nil {
		return err
	}
	if c.Key == nil || c.KeyID == "" || c.TeamID == "" || c.Topic == "" {
		return fmt.Errorf("%w: the client lacks its key, key id, team id or topic", webpush.ErrRefused)
	}
	body, err := payload(n)
	if err != nil {
		return err
	}
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	endpoint := strings.TrimSuffix(base, "/") + "/3/device/" + deviceToken
	ttl := n.TTL
	if ttl <= 0 {
		ttl = webpush.DefaultTTL
	}
	release, err := c.stream(ctx)
	if err != nil {
		return err
	}
	defer release()
	for attempt := 1; ; attempt++ {
		token, now, hc, err := c.providerToken()
		if err != nil {
			return err
		}
		err = c.post(ctx, hc, endpoint, token, now.Add(ttl), body, now)
		var ae *Error
		if err == nil || errors.As(err, &ae) && ae.Status != http.StatusForbidden {
			c.warmed()
		}
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Reason != "ExpiredProviderToken" {
			return err
		}
		// Apple's clock says our token is over an hour old. The first
		// time, a token old enough is replaced (once, for every sender)
		// and the message retried; otherwise it waits.
		if attempt > 1 {
			return c.pause(token, ae)
		}
		if retry, err := c.expired(token); err != nil || !retry {
			return cmp.Or(err, c.pause(token, ae))
		}
	}
}

// stream waits for one of the client's MaxStreams and answers its
// release. Until APNs has answered one request past its token check, the
// requests go one at a time: on a new connection authorised by a provider
// token, APNs allows a single stream until a request with a valid token
// has come (Apple's "Establishing a connection to APNs"), and net/http
// would open a connection for each request past it.
func (c *Client) stream(ctx context.Context) (func(), error) {
	c.mu.Lock()
	if c.streams == nil {
		c.streams = make(chan struct{}, cmp.Or(max(c.MaxStreams, 0), DefaultMaxStreams))
		c.first = make(chan struct{}, 1)
	}
	streams, first, warm := c.streams, c.first, c.warm
	c.mu.Unlock()
	c.waiting.Add(1)
	select {
	case streams <- struct{}{}:
		c.waiting.Add(-1)
	case <-ctx.Done():
		c.waiting.Add(-1)
		return nil, fmt.Errorf("apns: waiting for a stream: %w", ctx.Err())
	}
	if warm {
		return func() { <-streams }, nil
	}
	select {
	case first <- struct{}{}:
	case <-ctx.Done():
		<-streams
		return nil, fmt.Errorf("apns: waiting for the first answer: %w", ctx.Err())
	}
	c.mu.Lock()
	warm = c.warm
	c.mu.Unlock()
	if warm { // the request before this one warmed the connection
		<-first
		return func() { <-streams }, nil
	}
	return func() { <-first; <-streams }, nil
}

// warmed notes that APNs has answered a request past its token check:
// from now on requests go at once, up to MaxStreams.
func (c *Client) warmed() {
	c.mu.Lock()
	c.warm = true
	c.mu.Unlock()
}

// SendApp is Send of web push's notification (the shape the push lane
// builds for every platform), so the Client is the lane's sender of APNs
// as it is (worker.AppSender).
func (c *Client) SendApp(ctx context.Context, deviceToken string, n webpush.Notification) error {
	return c.Send(ctx, deviceToken, Notification{Title: n.Title, Body: n.Body, URL: n.URL})
}

// expired handles an ExpiredProviderToken answer to token: true when the
// send is to be retried, with the token another sender has already put in
// its place or with one minted now because token is at least tokenMinAge
// old; false when token is younger (no new token may be minted yet).
func (c *Client) expired(token string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != token {
		return true, nil
	}
	now := c.clock()
	if now.Sub(c.signedAt) < tokenMinAge {
		return false, nil
	}
	tok, err := c.sign(now)
	if err != nil {
		return false, err
	}
	c.token, c.signedAt = tok, now
	return true, nil
}

// pause turns an ExpiredProviderToken answer that cannot be met with a new
// token yet into a wait: push.ErrUnavailable, retried once token may be
// replaced (at least a minute on).
func (c *Client) pause(token string, ae *Error) error {
	c.mu.Lock()
	wait := time.Minute
	if c.token == token {
		wait = max(tokenMinAge-c.clock().Sub(c.signedAt), wait)
	}
	c.mu.Unlock()
	ae.class, ae.retryAfter = webpush.ErrUnavailable, wait
	return ae
}

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// providerToken is the provider token to send with (signed anew after
// tokenRefresh), the time, and the HTTP client.
func (c *Client) providerToken() (string, time.Time, *http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = c.HTTP
		if c.client == nil {
			c.client = NewHTTPClient(nil)
		}
	}
	now := c.clock()
	if c.token == "" || now.Sub(c.signedAt) >= tokenRefresh {
		tok, err := c.sign(now)
		if err != nil {
			return "", now, nil, err
		}
		c.token, c.signedAt = tok, now
	}
	return c.token, now, c.client, nil
}

// sign makes a provider token (RFC 7515 JWS, ES256: the signature is r
// and s as 32 bytes each).
func (c *Client) sign(now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	head, err := json.Marshal(map[string]string{"alg": "ES256", "kid": c.KeyID})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{"iss": c.TeamID, "iat": now.Unix()})
	if err != nil {
		return "", err
	}
	signing := enc.EncodeToString(head) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, c.Key, digest[:])
	if err != nil {
		return "", fmt.Errorf("apns: sign the provider token: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}

type aps struct {
	Alert alert `json:"alert"`
}

type alert struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

// payload encodes n, its title and body shortened to fit MaxPayload
// (push.Notification.Fit); only a URL too long for it is an error.
func payload(n Notification) ([]byte, error) {
	var out []byte
	_, err := webpush.Notification{Title: n.Title, Body: n.Body, URL: n.URL}.Fit(MaxPayload, func(m webpush.Notification) (int, error) {
		p := struct {
			APS aps    `json:"aps"`
			URL string `json:"url,omitempty"`
		}{aps{alert{m.Title, m.Body}}, m.URL}
		b, err := json.Marshal(p)
		if err != nil {
			return 0, fmt.Errorf("apns: encode the payload: %w", err)
		}
		out = b
		return len(b), nil
	})
	if err != nil {
		return nil, fmt.Errorf("apns: %w", err)
	}
	return out, nil
}

// Fits says whether n can be sent at all: its title and body are
// shortened to fit, so only a URL too long for any payload is refused
// (push.ErrTooLarge). The API asks at intake.
func Fits(n Notification) error {
	_, err := payload(n)
	return err
}

func (c *Client) post(ctx context.Context, hc *http.Client, endpoint, token string, expires time.Time, body []byte, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("apns: %w", err)
	}
	h := req.Header
	h.Set("Authorization", "bearer "+token)
	h.Set("Apns-Topic", c.Topic)
	h.Set("Apns-Push-Type", "alert")
	h.Set("Apns-Priority", "10")
	h.Set("Apns-Expiration", strconv.FormatInt(expires.Unix(), 10))
	h.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		// The path holds the device token: no log may keep it whole.
		device := strings.TrimPrefix(req.URL.Path, "/3/device/")
		return fmt.Errorf("apns: send: %w", webpush.HideURL(err, req.URL.Scheme+"://"+req.URL.Host+"/3/device/"+device[:8]+"…"))
	}
	defer func() { _ = resp.Body.Close() }() // the answer is read; a close error changes nothing
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if readErr != nil {
		answer = nil // classed by the status alone
	}
	return parseError(resp, answer, now)
}
