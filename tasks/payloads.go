package tasks

import "time"

// ConfirmPayload is the payload of TypeConfirmEmail.
type ConfirmPayload struct {
	Email string `json:"email"`
	// Nonce names this request, so a repeated run of the same task sends
	// once while a later request for a lost mail sends again.
	Nonce string `json:"nonce"`
}

// UnsubscribeLinkPayload is the payload of TypeUnsubscribeEmail.
type UnsubscribeLinkPayload struct {
	Email string `json:"email"`
	Nonce string `json:"nonce"` // one mail per request, as ConfirmPayload
}

// WelcomePayload is the payload of TypeWelcomeEmail.
type WelcomePayload struct {
	Email string `json:"email"`
}

// DigestPlanPayload is the payload of TypeDigestPlan.
type DigestPlanPayload struct {
	Period string `json:"period"`
}

// DigestBatchPayload is the payload of TypeDigestEmail: up to
// NEWSLETTER_DIGEST_BATCH recipients by id.
type DigestBatchPayload struct {
	Period string  `json:"period"`
	IDs    []int64 `json:"ids"`
}

// EventPayload is the payload of TypeEvent: one notification for one
// subscriber.
type EventPayload struct {
	ID    string    `json:"id"`
	Email string    `json:"email"`
	Title string    `json:"title"`
	URL   string    `json:"url"`
	At    time.Time `json:"at"`
}

// EventsPayload is the payload of TypeEventsEmail: one subscriber's bundle.
type EventsPayload struct {
	Email  string         `json:"email"`
	Events []EventPayload `json:"events"`
}
