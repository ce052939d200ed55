package console

import (
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
)

type sequenceData struct {
	// Form is the sequence as saved, or as typed when a save was refused;
	// Rows its steps as the form shows them, NewRow the empty one that
	// adds a step.
	Form   form.Sequence
	Rows   []stepRow
	NewRow stepRow
	// Topics are those the sequence can go to (the ones on offer).
	Topics []topics.Topic
}

// stepRow is a step's fields in the form. Key names its fields' ids and
// is what its remove box sends: its row's index (form.NewSequence), or
// "new" for the empty row.
type stepRow struct {
	form.Step
	Key    string
	Number int
}

// showSequence is GET /admin/sequence: the onboarding sequence's topic
// and steps (delay, template, subject, Markdown body) in one form, with
// an empty row to add a step and a box per step to remove it (read-only
// but for admins).
func (h *Handler) showSequence(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	snap := h.d.Catalog.Snapshot()
	f := form.Sequence{Version: snap.Version, Topic: snap.Set.Sequence.Topic}
	for _, st := range snap.Set.Sequence.Steps {
		f.Steps = append(f.Steps, form.Step{Template: st.Template, After: shortDuration(st.After), Subject: st.Subject, Body: st.Body})
	}
	h.sequencePage(w, r, http.StatusOK, f, "")
}

func (h *Handler) sequencePage(w http.ResponseWriter, r *http.Request, code int, f form.Sequence, problem string) {
	d := sequenceData{Form: f, Topics: h.d.Catalog.Current().Offered(), NewRow: stepRow{Key: "new"}}
	for i, st := range f.Steps {
		d.Rows = append(d.Rows, stepRow{Step: st, Key: strconv.Itoa(i), Number: i + 1})
	}
	h.render(w, r, code, "sequence", page{Title: "Sequence", Section: "sequence", Error: problem, Data: d})
}
