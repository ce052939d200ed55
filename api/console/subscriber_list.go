package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// subscribersPage is how many people a page lists.
const subscribersPage = 50

type subscriberListData struct {
	Query    string
	Status   string
	Topic    string
	Statuses []store.Status
	Topics   []topics.Topic
	People   []store.Subscriber
	// Listed: the list is there (People is wired); else only the search.
	Listed bool
	Next   string
}

var allStatuses = []store.Status{store.Active, store.Pending, store.Unsubscribed, store.Bounced, store.Complained}

// listSubscribers is GET /admin/subscribers?q=&status=&topic=&after=: a
// search by address goes straight to the person's page; otherwise the
// list by status and topic, a page at a time by id (keyset).
func (h *Handler) listSubscribers(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	d := subscriberListData{Query: qs.Get("q"), Statuses: allStatuses, Topics: h.cfg.Topics.Topics, Listed: h.d.People != nil}
	if d.Query != "" {
		email, err := address.Normalize(d.Query)
		if err != nil {
			h.render(w, r, http.StatusBadRequest, "subscribers", page{Title: "Subscribers", Section: "subscribers", Error: "That is not an e-mail address.", Data: d})
			return
		}
		sub, err := h.d.Store.Get(r.Context(), email)
		if errors.Is(err, store.ErrNotFound) {
			h.render(w, r, http.StatusNotFound, "subscribers", page{Title: "Subscribers", Section: "subscribers", Error: "Nobody with that address is on the list.", Data: d})
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		http.Redirect(w, r, "/admin/subscribers/"+itoa(sub.ID), http.StatusSeeOther)
		return
	}
	for _, s := range allStatuses {
		if string(s) == qs.Get("status") {
			d.Status = string(s)
		}
	}
	if _, ok := h.cfg.Topics.Topic(qs.Get("topic")); ok {
		d.Topic = qs.Get("topic")
	}
	if h.d.People != nil {
		after, _ := strconv.ParseInt(qs.Get("after"), 10, 64)
		list, err := h.d.People.ListSubscribers(r.Context(), store.Status(d.Status), d.Topic, max(after, 0), subscribersPage)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.People = list
		if len(list) == subscribersPage {
			v := url.Values{"after": {itoa(list[len(list)-1].ID)}}
			if d.Status != "" {
				v.Set("status", d.Status)
			}
			if d.Topic != "" {
				v.Set("topic", d.Topic)
			}
			d.Next = "/admin/subscribers?" + v.Encode()
		}
	}
	h.render(w, r, http.StatusOK, "subscribers", page{Title: "Subscribers", Section: "subscribers", Data: d})
}
