package console

import (
	"net/http"

	"github.com/newsletter/newsletter/store"
)

type subscriberData struct {
	Sub     store.Subscriber
	Topics  []topicBox
	History *History
}

// Suppressed tells the template whether to offer the lift.
func (d subscriberData) Suppressed() bool { return d.Sub.Status.Suppressed() }

// showSubscriber is GET /admin/subscribers/{id}: the person's record,
// topics, consent, mails, bounces and complaints, and the actions.
func (h *Handler) showSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	h.subscriberPage(w, r, http.StatusOK, sub, "")
}

func (h *Handler) subscriberPage(w http.ResponseWriter, r *http.Request, code int, sub store.Subscriber, problem string) {
	d := subscriberData{Sub: sub, Topics: h.topicBoxes(sub.Topics)}
	if h.d.People != nil {
		hist, err := h.d.People.History(r.Context(), sub)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.History = &hist
	}
	h.render(w, r, code, "subscriber", page{Title: sub.Email, Section: "subscribers", Error: problem, Data: d})
}
