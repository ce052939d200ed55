package form

import "net/http"

// Webhook is the form that registers a webhook endpoint.
type Webhook struct {
	URL    string
	Events []string
}

// NewWebhook reads the webhook form.
func NewWebhook(w http.ResponseWriter, r *http.Request) (Webhook, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Webhook{}, err
	}
	return Webhook{URL: value(r, "url"), Events: r.PostForm["events"]}, nil
}

// Version reads a form that carries the version its page showed (a
// restore): 0 when absent, and the store then checks against the
// version it reads.
func Version(w http.ResponseWriter, r *http.Request) (int, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return 0, err
	}
	return atoi(value(r, "version")), nil
}
