package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
)

// The notices of the Topics, Sequence and Mail templates screens, kept
// with them (render.go's notices are the rest's).
func init() {
	notices["topic-added"] = "The topic was added: it is on the signup form now."
	notices["topic-saved"] = "The topic was saved."
	notices["topic-retired"] = "The topic was retired: no longer offered; who had it keeps it."
	notices["topic-unretired"] = "The topic is offered again."
	notices["sequence-saved"] = "The sequence was saved: it applies to the steps not yet sent."
	notices["template-saved"] = "The template was saved: mail rendered from now on uses it."
}

// What a form says when what it changes was saved by someone else since
// its page was read.
const (
	staleCatalog  = "Changed since you read it: someone saved the topics or the sequence after you opened this page, so nothing was saved. Your values are below, over the version saved now: compare and save again."
	staleTemplate = "Changed since you read it: someone saved this template after you opened this page, so nothing was saved. Your text is below, over the version saved now: compare and save again."
)

// catalogMissing answers the catalog's screens on a deployment without a
// catalog; it reports whether it answered.
func (h *Handler) catalogMissing(w http.ResponseWriter, r *http.Request) bool {
	if h.d.Catalog != nil && h.d.Templates != nil {
		return false
	}
	h.errorPage(w, r, http.StatusNotImplemented, "Not here", "The topics, the sequence and the mail templates are not served on this deployment.")
	return true
}

// refusal is why a catalog form was not saved: the status and the
// reason the form shows again.
type refusal struct {
	code int
	msg  string
}

// onRefusal is how a catalog form answers a refusal: show puts the form
// again with the reason; a stale page (409) gets the stored version into
// *version first, so that a save from it goes over that one. A nil
// refusal is a store failure already answered.
func (h *Handler) onRefusal(r *http.Request, version *int64, show func(code int, msg string)) func(*refusal) {
	return func(why *refusal) {
		if why == nil {
			return
		}
		if why.code == http.StatusConflict {
			*version = h.freshCatalog(r.Context()).Version
		}
		show(why.code, why.msg)
	}
}

// saveTopics saves next over version as the signed-in person, and
// audits it as the API does (action, target, what changed and the new
// version). Not saved: the refusal for the form, or nil when the store
// failed and that was answered.
func (h *Handler) saveTopics(w http.ResponseWriter, r *http.Request, next topics.Set, version int64, action, target, detail string) (*refusal, bool) {
	saved, err := h.d.Catalog.SaveTopics(r.Context(), next, version, principalOf(r).Name)
	if err != nil {
		return h.catalogRefusal(w, r, err, staleCatalog), false
	}
	h.record(r, action, target, fmt.Sprintf("%s (version %d)", detail, saved.Version))
	return nil, true
}

// catalogRefusal sorts a save's (or catalog.Live.At's) error: a refused
// catalog is a 400 with its reason, a stale version a 409 saying stale;
// any other error is the store's, answered here (nil).
func (h *Handler) catalogRefusal(w http.ResponseWriter, r *http.Request, err error, stale string) *refusal {
	var bad *catalog.Error
	switch {
	case errors.As(err, &bad):
		return &refusal{http.StatusBadRequest, bad.Error()}
	case errors.Is(err, catalog.ErrStale):
		return &refusal{http.StatusConflict, stale}
	}
	h.storeAway(w, r, err)
	return nil
}

// shortDuration writes a step's delay as typed: 72h, 90m, 45s (not
// Go's 72h0m0s).
func shortDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// freshCatalog is the stored catalog, read again so that a stale form is
// shown over the version saved now; a store that fails leaves the
// catalog in hand (logged: the next save says stale again).
func (h *Handler) freshCatalog(ctx context.Context) catalog.Snapshot {
	snap, err := h.d.Catalog.Latest(ctx)
	if err != nil {
		h.d.Log.Warn("console: the catalog could not be read again", "err", err)
	}
	return snap
}
