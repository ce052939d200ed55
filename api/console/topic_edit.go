package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
)

type topicData struct {
	// Form is the topic as saved, or as typed when a save was refused.
	Form                form.Topic
	InSequence, Service bool
}

// editTopic is GET /admin/topics/{id}: the topic's form (read-only but
// for admins).
func (h *Handler) editTopic(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	snap := h.d.Catalog.Snapshot()
	t, ok := snap.Set.Topic(r.PathValue("id"))
	if !ok {
		h.notFound(w, r, "topic")
		return
	}
	h.topicPage(w, r, http.StatusOK, form.Topic{Version: snap.Version, ID: t.ID, Name: t.Name, Description: t.Description,
		Default: t.Default, Archive: !t.Private, Public: !t.Assigned, Retired: t.Retired, FeedsText: form.FeedsText(t.Feeds), Feeds: t.Feeds}, "")
}

func (h *Handler) topicPage(w http.ResponseWriter, r *http.Request, code int, f form.Topic, problem string) {
	seq := h.d.Catalog.Current().Sequence.Topic
	h.render(w, r, code, "topic", page{Title: "Topic " + f.ID, Section: "topics", Error: problem,
		Data: topicData{Form: f, InSequence: f.ID == seq, Service: f.ID == topics.Digest || f.ID == topics.Updates}})
}
