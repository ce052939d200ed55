package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// saveTopic is POST /admin/topics/{id}: the topic's name, description,
// default, archive flag, retired flag and feeds, over the version the
// page was read at (the others' topics and the sequence as they were
// then). A refusal shows the form again with the reason and what was
// typed; nothing is changed.
func (h *Handler) saveTopic(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	id := r.PathValue("id")
	if _, ok := h.d.Catalog.Current().Topic(id); !ok {
		h.notFound(w, r, "topic")
		return
	}
	f, err := form.NewTopic(w, r)
	f.ID = id
	if err != nil {
		h.topicPage(w, r, form.Status(err), f, err.Error())
		return
	}
	refused := h.onRefusal(r, &f.Version, func(code int, msg string) { h.topicPage(w, r, code, f, msg) })
	snap, err := h.d.Catalog.At(r.Context(), f.Version)
	if err != nil {
		refused(h.catalogRefusal(w, r, err, staleCatalog))
		return
	}
	next := catalog.CloneSet(snap.Set)
	for i := range next.Topics {
		if next.Topics[i].ID == id {
			next.Topics[i] = f.Topic()
		}
	}
	if why, saved := h.saveTopics(w, r, next, f.Version, audit.TopicsChanged, "topics", catalog.ChangedTopics(snap.Set, next)); !saved {
		refused(why)
		return
	}
	done(w, r, "/admin/topics", "topic-saved")
}
