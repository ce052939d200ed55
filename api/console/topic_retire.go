package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// retireTopic is POST /admin/topics/{id}/retire (retire true) and
// /unretire: a retired topic is no longer offered nor chosen for anyone,
// and kept (people and issues keep its id). Over the version the list
// was read at; a refusal (the digest, the updates or the sequence's
// topic) is the list again with the reason.
func (h *Handler) retireTopic(retire bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.catalogMissing(w, r) {
			return
		}
		id := r.PathValue("id")
		if _, ok := h.d.Catalog.Current().Topic(id); !ok {
			h.notFound(w, r, "topic")
			return
		}
		v, err := form.NewCatalogVersion(w, r)
		refused := func(why *refusal) {
			if why != nil {
				h.topicsPage(w, r, why.code, form.Topic{Archive: true, Public: true, Version: h.freshCatalog(r.Context()).Version}, why.msg)
			}
		}
		if err != nil {
			refused(&refusal{form.Status(err), err.Error()})
			return
		}
		snap, err := h.d.Catalog.At(r.Context(), v)
		if err != nil {
			refused(h.catalogRefusal(w, r, err, staleCatalog))
			return
		}
		next := catalog.CloneSet(snap.Set)
		for i := range next.Topics {
			if next.Topics[i].ID == id {
				next.Topics[i].Retired = retire
			}
		}
		notice := "topic-unretired"
		if retire {
			notice = "topic-retired"
		}
		if why, saved := h.saveTopics(w, r, next, v, audit.TopicsChanged, "topics", catalog.ChangedTopics(snap.Set, next)); !saved {
			refused(why)
			return
		}
		done(w, r, "/admin/topics", notice)
	}
}
