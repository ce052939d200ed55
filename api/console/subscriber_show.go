package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/store"
)

type subscriberData struct {
	Sub    store.Subscriber
	Topics []topicBox
	// Data is everything held about the person (nil: People is not
	// wired, the record alone).
	Data *store.PersonalData
	// CanRequest: the export and the erase are wired.
	CanRequest bool
}

// Suppressed tells the template whether to offer the lift.
func (d subscriberData) Suppressed() bool { return d.Sub.Status.Suppressed() }

// Bounces and Complaints split the person's feedback for the page.
func (d subscriberData) Bounces() []store.FeedbackEvent { return d.feedback(false) }

func (d subscriberData) Complaints() []store.FeedbackEvent { return d.feedback(true) }

func (d subscriberData) feedback(complaints bool) []store.FeedbackEvent {
	if d.Data == nil {
		return nil
	}
	var out []store.FeedbackEvent
	for _, f := range d.Data.Feedback {
		if (f.Type == store.Complaint) == complaints {
			out = append(out, f)
		}
	}
	return out
}

// showSubscriber is GET /admin/subscribers/{id}: the person's record,
// topics, consent, mails, bounces and complaints, and the actions.
func (h *Handler) showSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	h.subscriberPage(w, r, http.StatusOK, sub, "")
}

// subscriberPage renders sub's page with code, saying problem when there
// is one. The title names the person by id: a browser's history keeps
// titles, and an address has no business there.
func (h *Handler) subscriberPage(w http.ResponseWriter, r *http.Request, code int, sub store.Subscriber, problem string) {
	d := subscriberData{Sub: sub, Topics: h.topicBoxes(sub.Topics), CanRequest: h.d.Requests != nil}
	if h.d.People != nil {
		pd, err := h.d.People.PersonalData(r.Context(), sub.Email)
		if errors.Is(err, store.ErrNotFound) {
			// Erased between the two reads.
			h.notFound(w, r, "subscriber")
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Sub, d.Data = pd.Subscriber, &pd
	}
	h.render(w, r, code, "subscriber", page{Title: "Subscriber " + itoa(sub.ID), Section: "subscribers", Error: problem, Data: d})
}
