package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
)

// topicRow is a topic on the Topics screen.
type topicRow struct {
	topics.Topic
	// InSequence: the onboarding sequence goes to it (it cannot be
	// retired while it does); Service: the digest or the updates topic,
	// which the service itself sends to and which cannot be retired.
	InSequence, Service bool
}

type topicsData struct {
	Version int64
	Topics  []topicRow
	// Form is the add form: empty, or what was typed when a save was
	// refused.
	Form form.Topic
}

// listTopics is GET /admin/topics: every topic (retired ones too) with
// its flags and feeds, and for an admin the form that adds one.
func (h *Handler) listTopics(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	h.topicsPage(w, r, http.StatusOK, form.Topic{Archive: true, Public: true, Version: h.d.Catalog.Snapshot().Version}, "")
}

func (h *Handler) topicsPage(w http.ResponseWriter, r *http.Request, code int, f form.Topic, problem string) {
	snap := h.d.Catalog.Snapshot()
	d := topicsData{Version: snap.Version, Form: f}
	for _, t := range snap.Set.Topics {
		d.Topics = append(d.Topics, topicRow{Topic: t, InSequence: t.ID == snap.Set.Sequence.Topic, Service: t.ID == topics.Digest || t.ID == topics.Updates})
	}
	h.render(w, r, code, "topics", page{Title: "Topics", Section: "topics", Error: problem, Data: d})
}
