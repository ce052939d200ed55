package apns

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
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
	"time"

	"github.com/newsletter/newsletter/push"
)

// DefaultBaseURL is APNs' production origin; the sandbox's (for
// development builds of the app) is https://api.sandbox.push.apple.com.
const DefaultBaseURL = "https://api.push.apple.com"

// tokenRefresh is how long a provider token is reused: Apple takes one
// up to an hour old and refuses updates more often than about every 20
// minutes, so 50 minutes leaves room for clock skew both ways.
const tokenRefresh = 50 * time.Minute

// maxAnswer is how much of an answer's body is read.
const maxAnswer = 4096

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

	mu       sync.Mutex
	now      func() time.Time // the clock, for tests; nil means time.Now
	client   *http.Client     // HTTP or the default
	token    string           // the provider token, "" until signed
	signedAt time.Time
}

// NewHTTPClient is an HTTP client for APNs: HTTP/2 over TLS (trusting
// rootCAs, or the system's roots when nil), one connection carrying every
// concurrent request (see the package doc), a 30-second timeout a
// request, and HTTP/2 pings to find a connection that died quietly.
func NewHTTPClient(rootCAs *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			MaxConnsPerHost:     1,
			TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout:     time.Hour,
			HTTP2:               &http.HTTP2Config{SendPingTimeout: time.Minute, PingTimeout: 15 * time.Second},
		},
	}
}

// Send posts n to the app install with deviceToken. nil means APNs took
// the message; see the package doc for the errors.
func (c *Client) Send(ctx context.Context, deviceToken string, n Notification) error {
	if err := ValidToken(deviceToken); err != nil {
		return err
	}
	if c.Key == nil || c.KeyID == "" || c.TeamID == "" || c.Topic == "" {
		return fmt.Errorf("%w: the client lacks its key, key id, team id or topic", push.ErrRefused)
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
		ttl = push.DefaultTTL
	}
	for attempt := 1; ; attempt++ {
		token, now, hc, err := c.providerToken()
		if err != nil {
			return err
		}
		err = c.post(ctx, hc, endpoint, token, now.Add(ttl), body, now)
		var ae *Error
		// ExpiredProviderToken while ours is under 50 minutes old means
		// Apple's clock is ahead of ours: one new token, one retry.
		if attempt == 1 && errors.As(err, &ae) && ae.Status == http.StatusForbidden && ae.Reason == "ExpiredProviderToken" {
			c.refused(token)
			continue
		}
		return err
	}
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
	if c.token == "" || now.Sub(c.signedAt) >= tokenRefresh || now.Before(c.signedAt) {
		tok, err := c.sign(now)
		if err != nil {
			return "", now, nil, err
		}
		c.token, c.signedAt = tok, now
	}
	return c.token, now, c.client, nil
}

// refused forgets token, unless another sender has replaced it already:
// sends refused at once sign one new token between them, as Apple counts
// token updates.
func (c *Client) refused(token string) {
	c.mu.Lock()
	if c.token == token {
		c.token = ""
	}
	c.mu.Unlock()
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

func payload(n Notification) ([]byte, error) {
	p := struct {
		APS aps    `json:"aps"`
		URL string `json:"url,omitempty"`
	}{aps{alert{n.Title, n.Body}}, n.URL}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("apns: encode the payload: %w", err)
	}
	return b, nil
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
		return fmt.Errorf("apns: send: %w", err)
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
