package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

type subscriberListData struct {
	// Email is what the search was given (shown back when it found
	// nobody).
	Email    string
	Status   string
	Topic    string
	Statuses []store.Status
	Topics   []topics.Topic
	People   []store.Subscriber
	// Listed: the list is there (People is wired); else only the search.
	Listed bool
	Next   string
}

// listSubscribers is GET /admin/subscribers?status=&topic=&after=: the
// list by status and topic, a page at a time by id (keyset), read as
// GET /api/subscribers reads its query. The search by address is a form
// post (findSubscriber).
func (h *Handler) listSubscribers(w http.ResponseWriter, r *http.Request) {
	q, err := api.ParseSubscriberQuery(r.URL.Query(), h.cfg.Topics)
	if err != nil {
		d := h.subscriberList(store.SubscriberQuery{})
		d.Listed = false // no list is better than one that is not what was asked
		h.render(w, r, http.StatusBadRequest, "subscribers", page{Title: "Subscribers", Section: "subscribers",
			Error: "This list cannot be shown: " + err.Error() + ".", Data: d})
		return
	}
	h.subscribersPage(w, r, http.StatusOK, q, "", "")
}

// subscriberList is the screen's data for q before the list is read.
func (h *Handler) subscriberList(q store.SubscriberQuery) subscriberListData {
	return subscriberListData{Status: string(q.Status), Topic: q.Topic, Statuses: store.Statuses, Topics: h.cfg.Topics.Topics, Listed: h.d.People != nil}
}

// subscribersPage renders the screen with the page of q, and problem
// (with email, the search's) when there is one.
func (h *Handler) subscribersPage(w http.ResponseWriter, r *http.Request, code int, q store.SubscriberQuery, email, problem string) {
	d := h.subscriberList(q)
	d.Email = email
	if h.d.People != nil {
		if q.Limit == 0 {
			q.Limit = api.DefaultSubscriberPage
		}
		list, err := h.d.People.ListSubscribers(r.Context(), q)
		if errors.Is(err, store.ErrBadQuery) {
			h.errorPage(w, r, http.StatusBadRequest, "Bad list", "This list cannot be shown: "+err.Error()+".")
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.People = list.Subscribers
		if list.Next > 0 {
			v := url.Values{"after": {itoa(list.Next)}}
			if q.Status != "" {
				v.Set("status", string(q.Status))
			}
			if q.Topic != "" {
				v.Set("topic", q.Topic)
			}
			if q.Limit != api.DefaultSubscriberPage {
				v.Set("limit", itoa(int64(q.Limit)))
			}
			d.Next = "/admin/subscribers?" + v.Encode()
		}
	}
	h.render(w, r, code, "subscribers", page{Title: "Subscribers", Section: "subscribers", Error: problem, Data: d})
}
