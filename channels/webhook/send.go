package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
)

// DefaultTimeout is how long an endpoint has to answer: the
// specification recommends 15 to 30 seconds, so a receiver has time to
// process; the worker's pool is what it costs.
const DefaultTimeout = 15 * time.Second

// maxAnswer is how much of an endpoint's answer is read: only its status
// counts.
const maxAnswer = 4 << 10

// Limits are the netguard limits of the webhook client.
var Limits = netguard.Limits{Timeout: DefaultTimeout, MaxResponse: maxAnswer}

// Message is one event for one endpoint: its webhook-id and the body, the
// same bytes on every attempt.
type Message struct {
	ID   string
	Body []byte
}

// Sender delivers messages, one POST each.
type Sender struct {
	// Client makes the requests: a netguard.Guard's client, which
	// refuses private addresses at connect time, follows no redirect and
	// gives up after its timeout.
	Client *http.Client
	// Now is the attempt's time for webhook-timestamp (nil: time.Now).
	Now func() time.Time
}

// NewSender is a Sender on g's client with Limits.
func NewSender(g netguard.Guard) *Sender { return &Sender{Client: g.Client(Limits)} }

// Refused is an endpoint's answer other than 2xx. 3xx is one too: a
// redirect is not followed, the URL should be updated instead.
type Refused struct {
	Status int
	// Wait is the answer's Retry-After (0: none), which the next
	// attempt honours.
	Wait time.Duration
}

func (e *Refused) Error() string { return "the endpoint answered " + strconv.Itoa(e.Status) }

// Gone tells an endpoint that asked to get nothing more (410 Gone): the
// specification says to disable it.
func (e *Refused) Gone() bool { return e.Status == http.StatusGone }

// AsRefused is err's *Refused, or nil.
func AsRefused(err error) *Refused {
	var r *Refused
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// Send posts m to endpoint, signed with secret. nil means the endpoint
// answered 2xx: delivered. A *Refused is any other answer; any other error
// is a failure to get an answer (refused connection, timeout, a private
// address at connect time). Errors never quote the URL, which may hold a
// token of the receiver's.
func (s *Sender) Send(ctx context.Context, endpoint, secret string, m Message) error {
	_, err := s.Post(ctx, endpoint, secret, m)
	return err
}

// Post is Send that also answers the endpoint's status code (0 when it
// gave no answer), which the endpoint's log of deliveries shows.
func (s *Sender) Post(ctx context.Context, endpoint, secret string, m Message) (int, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now()
	sig, err := Sign(secret, m.ID, at, m.Body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(m.Body))
	if err != nil {
		return 0, errors.New("the endpoint's URL cannot be requested")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "newsletter-webhooks/1")
	req.Header.Set(HeaderID, m.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := s.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("post the event: %w", err)
	}
	// Only the status counts: an answer cut short after it changes
	// nothing (read a little, so the connection can be reused).
	_, _ = netguard.ReadLimited(resp.Body, maxAnswer)
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, &Refused{Status: resp.StatusCode, Wait: retryAfter(resp.Header.Get("Retry-After"), at)}
	}
	return resp.StatusCode, nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
