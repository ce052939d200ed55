package console

import (
	"fmt"
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
)

// saveSequence is POST /admin/sequence: the topic and the whole list of
// steps (the ones ticked for removal left out, the new row added), as
// PUT /api/sequence over the version the page was read at. Every step's
// mail must render; a refusal shows the form again with the reason and
// what was typed, nothing changed.
func (h *Handler) saveSequence(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	f, err := form.NewSequence(w, r)
	if err != nil {
		h.sequencePage(w, r, form.Status(err), f, err.Error())
		return
	}
	refused := h.onRefusal(r, &f.Version, func(code int, msg string) { h.sequencePage(w, r, code, f, msg) })
	var kept []catalog.StepJSON
	for _, st := range f.Steps {
		if !st.Remove {
			kept = append(kept, catalog.StepJSON{Template: st.Template, After: st.After, Subject: st.Subject, Body: st.Body})
		}
	}
	steps, err := catalog.StepsFromJSON(kept)
	if err != nil {
		refused(&refusal{http.StatusBadRequest, err.Error()})
		return
	}
	snap, err := h.d.Catalog.At(r.Context(), f.Version)
	if err != nil {
		refused(h.catalogRefusal(w, r, err, staleCatalog))
		return
	}
	next := catalog.CloneSet(snap.Set)
	next.Sequence = topics.Sequence{Topic: f.Topic, Steps: steps}
	if next.Sequence.Topic == "" {
		next.Sequence.Topic = snap.Set.Sequence.Topic
	}
	if why, saved := h.saveTopics(w, r, next, f.Version, audit.SequenceChanged, "sequence", fmt.Sprintf("%d steps", len(steps))); !saved {
		refused(why)
		return
	}
	done(w, r, "/admin/sequence", "sequence-saved")
}
