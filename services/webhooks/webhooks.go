// Package webhooks registers and tests the outgoing webhook endpoints for
// the API, the console and the commands alike: one Service, built once by
// the binary, so an endpoint is checked the same way whoever adds it.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Service registers endpoints and queues their test events.
type Service struct {
	Store store.Webhooks
	Queue tasks.Enqueuer
	// Guard checks an endpoint's URL (https, public addresses unless
	// NEWSLETTER_WEBHOOK_ALLOW_PRIVATE).
	Guard netguard.Guard
	// NewSecret makes an endpoint's signing secret in the form its
	// channel signs with (channels/webhook.NewSecret).
	NewSecret func() string
	// Now is the clock of the test events (time.Now when nil).
	Now func() time.Time
}

// maxWebhookURL bounds an endpoint's URL.
const maxWebhookURL = 2048

// Test queues one sample event (tasks.WebhookTestType) for the active
// endpoint id: the worker signs and posts it as any event and logs the
// outcome in the endpoint's deliveries. It answers the event's id, or
// store.ErrWebhookNotFound, ErrDisabled, or the queue's error.
func (s *Service) Test(ctx context.Context, id string) (string, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	hook, err := s.Store.GetWebhook(ctx, id)
	if err != nil {
		return "", err
	}
	if hook.State != store.WebhookActive {
		return "", ErrDisabled
	}
	t, p, err := tasks.NewWebhookTest(hook.ID, now())
	if err != nil {
		return "", err
	}
	if _, err := s.Queue.EnqueueContext(ctx, t); err != nil {
		return "", fmt.Errorf("queue the test event: %w", err)
	}
	return p.ID, nil
}

// ErrDisabled is a test of a disabled endpoint (409): it would
// get nothing.
var ErrDisabled = errors.New("the endpoint is disabled: enable it to test it")

// BadEndpointError is an endpoint RegisterWebhook refuses (400).
type BadEndpointError struct{ Msg string }

func (e *BadEndpointError) Error() string { return e.Msg }

// Register checks and stores a new endpoint, for the API and the
// console alike: a *BadEndpointError for an unknown event or a URL that is
// not https or resolves to a private address (per the Guard),
// store.ErrTooManyWebhooks, or the store's error; nothing stored then.
// The endpoint returned holds its secret, to be shown once.
func (s *Service) Register(ctx context.Context, raw string, given []string) (store.Webhook, error) {
	raw = strings.TrimSpace(raw)
	events, msg := webhookEvents(given)
	switch {
	case raw == "":
		msg = `want "url": the endpoint's https URL`
	case len(raw) > maxWebhookURL || strings.ContainsAny(raw, " \t\r\n"):
		msg = "the URL must be at most 2048 characters, without spaces or line breaks"
	}
	if msg != "" {
		return store.Webhook{}, &BadEndpointError{Msg: msg}
	}
	if _, err := s.Guard.CheckURL(ctx, raw); err != nil {
		return store.Webhook{}, &BadEndpointError{Msg: err.Error()}
	}
	return s.Store.AddWebhook(ctx, store.Webhook{ID: newWebhookID(), URL: raw, Events: events, Secret: s.NewSecret()})
}

// webhookEvents checks the events field: known types, at least one; the
// list as given, without repeats. The message is "" when they are fine.
func webhookEvents(given []string) ([]string, string) {
	if len(given) == 0 {
		return nil, `want "events": a list of at least one of ` + strings.Join(tasks.WebhookTypes, ", ")
	}
	var out []string
	for _, e := range given {
		if !tasks.KnownWebhookType(e) {
			return nil, "unknown event " + webjson.Quote(e) + ": want " + strings.Join(tasks.WebhookTypes, ", ")
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, ""
}

func newWebhookID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "wh_" + hex.EncodeToString(b[:])
}
