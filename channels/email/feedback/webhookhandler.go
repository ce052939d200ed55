package feedback

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/webjson"
)

// MaxWebhookBody bounds a provider's request: SendGrid batches events.
const MaxWebhookBody = 1 << 20

// ErrUnusable is wrapped by an EventQueue's refusal of an event it can
// never take (one naming no address): the event is skipped, the rest of
// the batch queued.
var ErrUnusable = errors.New("feedback event unusable")

// EventQueue takes the events a provider's webhook read; the process
// supplies it (it queues a feedback task for each). An event taken before
// (the same ID) is no error; an error not ErrUnusable means the events
// were not taken and the provider must deliver again (503).
type EventQueue interface {
	Queue(ctx context.Context, ev Event) error
}

// FailureBudget slows a client that keeps sending unverified requests
// (*adminauth.Guard, shared with the admin token's routes): nil while it
// has failures left.
type FailureBudget interface {
	Failed(r *http.Request) *adminauth.TooManyError
}

// WebhookHandler is POST /webhooks/<Source>: it verifies a provider's
// request (bounces and complaints coming in) and queues its events; the
// worker applies them, so the provider gets its answer at once.
// Unverified: 401 and nothing queued (429 past the client's failure
// budget). The request cannot be checked or the queue is down: 503, and
// the provider delivers again later. Its guards are all here: the body
// cap (MaxWebhookBody), the provider's verification (Webhook) and the
// failure budget (Failures).
type WebhookHandler struct {
	// Source is the provider's name (ses, sendgrid, mailgun, postmark):
	// each event's Source and the route's last segment.
	Source   string
	Webhook  ProviderWebhook
	Queue    EventQueue
	Failures FailureBudget
	Log      *slog.Logger // nil: slog.Default()
}

// ServeHTTP handles one request of the provider's.
func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := httpbody.Limit(w, r, MaxWebhookBody)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(r.Body)
	}
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	events, err := h.Webhook.Events(r, body)
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	for _, ev := range events {
		if ev.Kind == KindTest {
			continue // about a test send: no subscriber's
		}
		ev.Source = h.Source
		err := h.Queue.Queue(r.Context(), ev)
		if errors.Is(err, ErrUnusable) {
			// One unusable event (no address) must not make the
			// provider send the whole batch again.
			h.log().Info("webhook event skipped", "source", h.Source, "err", logredact.Clip(err.Error()))
			continue
		}
		if err != nil {
			h.log().Error("webhook: could not queue an event", "source", h.Source, "err", err)
			writeError(w, http.StatusServiceUnavailable, "could not queue the events, please retry")
			return
		}
	}
	webjson.Write(w, http.StatusOK, map[string]int{"queued": len(events)})
}

// refuse answers a request whose events could not be read: unverified
// (401, or 429 past the failure budget), not checkable now (503), or
// verified but unreadable (400).
func (h *WebhookHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrUnauthorized):
		h.log().Warn("webhook refused", "source", h.Source, "err", logredact.Clip(err.Error()))
		// A provider's password (Postmark) or signing key (Mailgun) is
		// guessed online like the admin token: the same failure budget
		// per client slows it, and the provider itself, which holds the
		// secret, is never slowed.
		if tooMany := h.Failures.Failed(r); tooMany != nil {
			w.Header().Set("Retry-After", tooMany.RetryAfterHeader())
			writeError(w, http.StatusTooManyRequests, "too many unverified requests from this address: try again later")
			return
		}
		writeError(w, http.StatusUnauthorized, "not verified")
	case errors.Is(err, ErrUnavailable):
		h.log().Error("webhook: could not check the request", "source", h.Source, "err", logredact.Clip(err.Error()))
		writeError(w, http.StatusServiceUnavailable, "cannot check the request just now, please retry")
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

// writeError answers the API's JSON error body: the webhooks are mounted
// on the API's server.
func writeError(w http.ResponseWriter, code int, msg string) {
	webjson.Write(w, code, map[string]string{"error": msg})
}

func (h *WebhookHandler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
