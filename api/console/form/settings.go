package form

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/store"
)

// NewSettings reads the settings form: every field (an empty one clears
// it; the test recipients separated by commas, spaces or lines) and the
// version the page showed. The values are checked by
// settings.Check when saved.
func NewSettings(w http.ResponseWriter, r *http.Request) (store.Settings, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return store.Settings{}, err
	}
	s := store.Settings{
		Name: value(r, "name"), Description: value(r, "description"), From: value(r, "from"), ReplyTo: value(r, "reply_to"),
		PostalAddress: value(r, "postal_address"), LogoURL: value(r, "logo_url"), Accent: value(r, "accent"),
		ConfirmedHeading: value(r, "confirmed_heading"), ConfirmedText: value(r, "confirmed_text"), ConfirmedURL: value(r, "confirmed_url"),
		TestRecipients: list(value(r, "test_recipients")),
	}
	v, err := strconv.ParseInt(value(r, "version"), 10, 64)
	if err != nil || v < 0 {
		return s, errors.New("the form lacks the version it was opened at; reload the page")
	}
	s.Version = v
	return s, nil
}
