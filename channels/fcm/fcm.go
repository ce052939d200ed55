package fcm

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/h2client"
)

// DefaultBaseURL is FCM's API origin.
const DefaultBaseURL = "https://fcm.googleapis.com"

// Scope is the OAuth scope of sending with FCM.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// refreshEarly is how long before its expiry an access token is replaced:
// Google's tokens live an hour, and a token that expires on the way to
// FCM costs a 401 and a retry.
const refreshEarly = 5 * time.Minute

// defaultTimeout bounds a request of the default HTTP client, the token
// exchange included (which does not follow Send's context: its result
// serves every sender).
const defaultTimeout = 30 * time.Second

// maxAnswer is how much of an answer's body is read.
const maxAnswer = 64 << 10

// MaxPayload bounds a message's notification and data together. FCM's
// overview says a message carries up to 4096 bytes, but its HTTP v1 API
// counts some overhead of its own and has refused notification messages
// under 4000 bytes of text (answering 400 INVALID_ARGUMENT, which drops
// the message), and Firebase's message guide gives 4000: we keep under
// the smaller. They are measured as sent, in JSON, which is never less
// than FCM's count of their text.
const MaxPayload = 4000

// DefaultMaxStreams is how many requests a Client has in flight at once
// unless told (Client.MaxStreams): fcm.googleapis.com advertises 100
// concurrent streams a connection (SETTINGS_MAX_CONCURRENT_STREAMS), so
// one connection carries them; past what FCM allows, net/http opens a
// second connection rather than fail.
const DefaultMaxStreams = 100

// NewHTTPClient is an HTTP client for FCM (h2client.New): HTTP/2 over TLS
// (trusting rootCAs, or the system's roots when nil), one connection
// carrying every concurrent request, a timeout of defaultTimeout a
// request, and HTTP/2 pings to find a connection that died quietly.
func NewHTTPClient(rootCAs *x509.CertPool) *http.Client {
	return h2client.New(rootCAs, defaultTimeout)
}

// Notification is one mobile notification: a title, a line of text, and
// the page (or deep link) a tap opens, sent as the data key "url". It has
// the fields of apns.Notification, so one converts to the other.
type Notification struct {
	Title string
	Body  string
	URL   string
	// TTL is how long FCM keeps the message for a device that is offline
	// (android.ttl, whole seconds); 0 means push.DefaultTTL.
	TTL time.Duration
}

// Client sends through FCM HTTP v1 as one service account. Set its fields
// before the first Send and not after; it is then safe for concurrent use.
type Client struct {
	Creds *Credentials
	// BaseURL is FCM's origin; empty means DefaultBaseURL.
	BaseURL string
	// HTTP posts the messages and makes the token exchange; nil means
	// NewHTTPClient(nil), made once: HTTP/2 to fcm.googleapis.com over
	// one connection.
	HTTP *http.Client
	// MaxStreams is the most messages the client has in flight at once,
	// every caller's together: the streams of its one HTTP/2 connection
	// (0: DefaultMaxStreams). A Send past it waits for a stream, or for
	// its context.
	MaxStreams int

	mu      sync.Mutex
	tokens  *tokenCache
	client  *http.Client  // HTTP or the default
	streams chan struct{} // MaxStreams slots, made on first use
	waiting atomic.Int32  // sends waiting for a stream (for tests)
}

// Send posts n to the app install with registration token. nil means FCM
// took the message; see the package doc for the errors.
func (c *Client) Send(ctx context.Context, token string, n Notification) error {
	if err := ValidToken(token); err != nil {
		return err
	}
	tokens, err := c.tokenCache()
	if err != nil {
		return err
	}
	body, err := messageBody(token, n)
	if err != nil {
		return err
	}
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	endpoint := strings.TrimSuffix(base, "/") + "/v1/projects/" + url.PathEscape(c.Creds.ProjectID) + "/messages:send"
	release, err := c.stream(ctx)
	if err != nil {
		return err
	}
	defer release()
	for attempt := 1; ; attempt++ {
		access, src, err := tokens.token()
		if err != nil {
			return err
		}
		err = c.post(ctx, endpoint, access, body)
		var fe *Error
		// A 401 other than THIRD_PARTY_AUTH_ERROR (which is about the
		// app's APNs credentials in Firebase, not ours) says our access
		// token was not accepted: revoked, or expired sooner than it said.
		// One fresh token and one retry; a second 401 is a refusal.
		if attempt == 1 && errors.As(err, &fe) && fe.Status == http.StatusUnauthorized && fe.Code != "THIRD_PARTY_AUTH_ERROR" {
			tokens.refused(src)
			continue
		}
		return err
	}
}

// SendApp is Send of web push's notification (the shape the push lane
// builds for every platform), so the Client is the lane's sender of FCM
// as it is (worker.AppSender).
func (c *Client) SendApp(ctx context.Context, token string, n webpush.Notification) error {
	return c.Send(ctx, token, Notification{Title: n.Title, Body: n.Body, URL: n.URL})
}

// stream waits for one of the client's MaxStreams and answers its
// release.
func (c *Client) stream(ctx context.Context) (func(), error) {
	c.mu.Lock()
	if c.streams == nil {
		n := c.MaxStreams
		if n <= 0 {
			n = DefaultMaxStreams
		}
		c.streams = make(chan struct{}, n)
	}
	streams := c.streams
	c.mu.Unlock()
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case streams <- struct{}{}:
		return func() { <-streams }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fcm: waiting for a stream: %w", ctx.Err())
	}
}

func (c *Client) httpClient() *http.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.httpClientLocked()
}

func (c *Client) httpClientLocked() *http.Client {
	if c.client == nil {
		c.client = c.HTTP
		if c.client == nil {
			c.client = NewHTTPClient(nil)
		}
	}
	return c.client
}

// tokenCache makes the client's token cache on first use, so a Client
// is usable as a struct literal.
func (c *Client) tokenCache() (*tokenCache, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tokens != nil {
		return c.tokens, nil
	}
	if c.Creds == nil || c.Creds.key == nil {
		return nil, fmt.Errorf("%w: the client has no credentials from LoadCredentials", ErrCredentials)
	}
	cfg := &jwt.Config{
		Email:        c.Creds.ClientEmail,
		PrivateKey:   []byte(c.Creds.PrivateKey),
		PrivateKeyID: c.Creds.PrivateKeyID,
		Scopes:       []string{Scope},
		TokenURL:     c.Creds.TokenURI,
	}
	// The token source keeps this context for every later exchange: it
	// carries the HTTP client and must outlive any one Send.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, c.httpClientLocked())
	c.tokens = &tokenCache{cfg: cfg, ctx: ctx}
	c.tokens.reset()
	return c.tokens, nil
}

// tokenCache holds the access token: an oauth2 reusing token source
// (which refreshes under its own lock, so concurrent senders wait for one
// exchange), replaced by a fresh one when FCM refuses its token.
type tokenCache struct {
	cfg *jwt.Config
	ctx context.Context

	mu  sync.Mutex
	src oauth2.TokenSource
}

func (tc *tokenCache) reset() {
	// jwt.Config.TokenSource is a reusing source with no token yet;
	// ReuseTokenSourceWithExpiry sets how early it refreshes.
	tc.src = oauth2.ReuseTokenSourceWithExpiry(nil, tc.cfg.TokenSource(tc.ctx), refreshEarly)
}

// token is the current access token and the source it came from (for
// refused).
func (tc *tokenCache) token() (string, oauth2.TokenSource, error) {
	tc.mu.Lock()
	src := tc.src
	tc.mu.Unlock()
	t, err := src.Token()
	if err != nil {
		return "", nil, exchangeError(err)
	}
	return t.AccessToken, src, nil
}

// refused drops the cached token that src gave, unless another sender
// has dropped it already: fifty sends refused at once make one exchange.
func (tc *tokenCache) refused(src oauth2.TokenSource) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.src == src {
		tc.reset()
	}
}

// exchangeError classes a failed token exchange: the token endpoint's
// 429 and 5xx are worth a retry, its other answers (a key revoked, the
// account deleted: invalid_grant) are not.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		return fmt.Errorf("fcm: access token: %w", err)
	}
	// jwt's exchange leaves RetrieveError's fields empty: read the
	// OAuth error (RFC 6749 section 5.2) from the body.
	var oauthErr struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(re.Body, &oauthErr) // not JSON: the status says enough
	e := &Error{Status: re.Response.StatusCode, Code: oauthErr.Error, Message: "access token exchange refused"}
	if oauthErr.Description != "" {
		e.Message += ": " + oauthErr.Description
	}
	if e.Status == http.StatusTooManyRequests || e.Status >= 500 {
		e.class = webpush.ErrUnavailable
		e.retryAfter = webpush.ParseRetryAfter(re.Response.Header.Get("Retry-After"), time.Now())
	} else {
		e.class = webpush.ErrRefused
	}
	return e
}

type message struct {
	Message struct {
		Token        string            `json:"token"`
		Notification notification      `json:"notification"`
		Data         map[string]string `json:"data,omitempty"`
		Android      struct {
			TTL string `json:"ttl"`
		} `json:"android"`
	} `json:"message"`
}

type notification struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
}

// messageBody encodes the message to token, n's title and body shortened
// to fit MaxPayload (push.Notification.Fit); only a URL too long for it
// is an error.
func messageBody(token string, n Notification) ([]byte, error) {
	var m message
	m.Message.Token = token
	fitted, err := webpush.Notification{Title: n.Title, Body: n.Body, URL: n.URL}.Fit(MaxPayload, func(p webpush.Notification) (int, error) {
		m.Message.Notification = notification{Title: p.Title, Body: p.Body}
		m.Message.Data = nil
		if p.URL != "" {
			m.Message.Data = map[string]string{"url": p.URL}
		}
		return payloadSize(m.Message.Notification, m.Message.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	m.Message.Notification = notification{Title: fitted.Title, Body: fitted.Body}
	ttl := n.TTL
	if ttl <= 0 {
		ttl = webpush.DefaultTTL
	}
	m.Message.Android.TTL = fmt.Sprintf("%ds", int64(ttl/time.Second))
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("fcm: encode the message: %w", err)
	}
	return b, nil
}

// payloadSize is what a message's notification and data take, as JSON.
func payloadSize(n notification, data map[string]string) (int, error) {
	a, err := json.Marshal(n)
	if err != nil {
		return 0, fmt.Errorf("fcm: encode the notification: %w", err)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return 0, fmt.Errorf("fcm: encode the data: %w", err)
	}
	return len(a) + len(b), nil
}

// Fits says whether n can be sent at all: its title and body are
// shortened to fit, so only a URL too long for any message is refused
// (push.ErrTooLarge). The API asks at intake.
func Fits(n Notification) error {
	_, err := messageBody("", n)
	return err
}

func (c *Client) post(ctx context.Context, endpoint, access string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("fcm: %w", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+access)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("fcm: send: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // the answer is read; a close error changes nothing
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The status says FCM took the message; the body (its name) is
		// read only so the connection is reused.
		return nil
	}
	if readErr != nil {
		answer = nil // classed by the status alone
	}
	return parseError(resp, answer)
}
