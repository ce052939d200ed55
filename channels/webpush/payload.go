package webpush

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Notification is what the service worker (/sw.js) shows: a title, a
// line of text, and the page a click opens. It is the plaintext of every
// push message, as JSON.
type Notification struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	URL   string `json:"url,omitempty"`
}

// EventNotification is the notification of a product event (its title
// and link).
func EventNotification(title, url string) Notification {
	return Notification{Title: title, URL: url}
}

// CheckEvent says whether an event's notification fits one push
// message: the title is shortened to fit, so only a URL too long for any
// message is refused (ErrTooLarge). The API calls it at intake, so such an
// event is a 400 rather than a dead letter in every reader's push lane.
func CheckEvent(title, url string) error {
	_, err := EventNotification(title, url).Payload()
	return err
}

// IssueNotification is the notification of a new issue: its subject, and
// a link to read it on the web.
func IssueNotification(subject, url string) Notification {
	return Notification{Title: subject, Body: "A new issue is out.", URL: url}
}

// maxText bounds the title and the body: a notification shows a line or
// two, and the whole must fit its platform's message (MaxPayload for web
// push, 4096 bytes for APNs and FCM).
const maxText = 1000

// Payload encodes n as the message's plaintext, shortening a long title or
// body (Fit) so it fits one push message. Only a URL too long for a
// message is an error.
func (n Notification) Payload() ([]byte, error) {
	var out []byte
	_, err := n.Fit(MaxPayload, func(m Notification) (int, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			return 0, fmt.Errorf("push payload: %w", err)
		}
		out = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		return len(out), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Fit shortens n's title and body (at a character boundary, marked with
// an ellipsis) until size, what n takes in the message of its platform
// (a web push plaintext, an APNs payload, an FCM message), is at most
// limit. Only a URL too long for such a message is an error (ErrTooLarge):
// the title and body are never dropped whole, and never sent too large
// for the platform to take.
func (n Notification) Fit(limit int, size func(Notification) (int, error)) (Notification, error) {
	// JSON escaping can make text several times longer: halve until it fits.
	for cut := maxText; ; cut /= 2 {
		n.Title, n.Body = clip(n.Title, cut), clip(n.Body, cut)
		got, err := size(n)
		if err != nil {
			return n, err
		}
		if got <= limit {
			return n, nil
		}
		if cut < 8 {
			return n, fmt.Errorf("%w: %d bytes over a limit of %d (the URL is %d bytes)", ErrTooLarge, got, limit, len(n.URL))
		}
	}
}

// clip shortens s to at most n bytes without splitting a character,
// marking the cut with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len("…"), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
