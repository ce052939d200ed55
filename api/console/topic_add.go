package console

import (
	"fmt"
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// addTopic is POST /admin/topics: one new topic, added last, as POST
// /api/topics but over the version the page was read at. A refusal
// shows the list again with the reason and what was typed.
func (h *Handler) addTopic(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	f, err := form.NewTopic(w, r)
	if err != nil {
		h.topicsPage(w, r, form.Status(err), f, err.Error())
		return
	}
	refused := h.onRefusal(r, &f.Version, func(code int, msg string) { h.topicsPage(w, r, code, f, msg) })
	snap, err := h.d.Catalog.At(r.Context(), f.Version)
	if err != nil {
		refused(h.catalogRefusal(w, r, err, staleCatalog))
		return
	}
	if _, ok := snap.Set.Topic(f.ID); ok {
		refused(&refusal{http.StatusConflict, fmt.Sprintf("topic %q exists: change it on its own page", f.ID)})
		return
	}
	next := catalog.CloneSet(snap.Set)
	next.Topics = append(next.Topics, f.Topic())
	if why, saved := h.saveTopics(w, r, next, f.Version, audit.TopicsChanged, "topics", "added "+f.ID); !saved {
		refused(why)
		return
	}
	done(w, r, "/admin/topics", "topic-added")
}
