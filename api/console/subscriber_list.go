package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
)

type subscriberListData struct {
	// Email is what the find-by-address form was given (shown back when
	// it found nobody).
	Email    string
	Q        string
	Status   string
	Topic    string
	Statuses []store.Status
	Topics   []topics.Topic
	Actions  []string
	People   []store.Subscriber
	// Listed: the list is there (People is wired); else only the search.
	Listed bool
	// Owned: the add, bulk and export forms are there (List is wired).
	Owned bool
	// Total is how many the filter selects (-1: not known, a search
	// narrowed by status or topic); Next and Prev the pages' links.
	Total      int64
	Next, Prev string
	// Domain is the domain a search for "example.org" or "@example.org"
	// listed everyone at (no address or name began with it);
	// DomainPartial: a bound stopped the read, there may be more.
	Domain        string
	DomainPartial bool
}

// listSubscribers is GET /admin/subscribers?q=&status=&topic=&after=&before=:
// the list by status and topic a page at a time by id, or a search by
// the beginning of an address or name (q), with the total and pages both
// ways, read as GET /api/subscribers reads its query. The find by a whole
// address is a form post (findSubscriber).
func (h *Handler) listSubscribers(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	if v.Get("q") != "" {
		q, err := subscribers.ParseSearchQuery(v, h.cfg.Topics.Current())
		if err != nil {
			h.badList(w, r, err)
			return
		}
		h.searchPage(w, r, q)
		return
	}
	q, err := subscribers.ParseSubscriberQuery(v, h.cfg.Topics.Current())
	if err != nil {
		h.badList(w, r, err)
		return
	}
	h.subscribersPage(w, r, http.StatusOK, q, "", "")
}

func (h *Handler) badList(w http.ResponseWriter, r *http.Request, err error) {
	d := h.subscriberList(store.Filter{})
	d.Listed = false // no list is better than one that is not what was asked
	h.render(w, r, http.StatusBadRequest, "subscribers", page{Title: "Subscribers", Section: "subscribers",
		Error: "This list cannot be shown: " + err.Error() + ".", Data: d})
}

// subscriberList is the screen's data for f before the list is read.
func (h *Handler) subscriberList(f store.Filter) subscriberListData {
	return subscriberListData{Q: f.Q, Status: string(f.Status), Topic: f.Topic, Statuses: store.Statuses, Topics: h.cfg.Topics.Current().Topics,
		Actions: listjobs.Actions, Listed: h.d.People != nil, Owned: h.d.List != nil}
}

// pageLink is the list's URL for f with one more parameter (after or
// before).
func pageLink(f store.Filter, limit int, key, cursor string) string {
	v := url.Values{key: {cursor}}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	if f.Status != "" {
		v.Set("status", string(f.Status))
	}
	if f.Topic != "" {
		v.Set("topic", f.Topic)
	}
	if limit != subscribers.DefaultSubscriberPage {
		v.Set("limit", itoa(int64(limit)))
	}
	return "/admin/subscribers?" + v.Encode()
}

// searchPage renders the screen with a page of the search q.
func (h *Handler) searchPage(w http.ResponseWriter, r *http.Request, q store.SearchQuery) {
	f := store.Filter{Q: q.Q, Status: q.Status, Topic: q.Topic}
	d := h.subscriberList(f)
	if h.d.People != nil {
		res, err := h.d.People.Search(r.Context(), q)
		if errors.Is(err, store.ErrBadQuery) {
			h.badList(w, r, err)
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.People, d.Total = res.Subscribers, res.Total
		if domain, ok := store.SearchDomainOf(q.Q); ok && len(res.Subscribers) == 0 && q.After == "" && q.Before == "" {
			if !h.searchDomain(w, r, &d, domain, q) {
				return
			}
		}
		if res.Next != "" {
			d.Next = pageLink(f, q.Limit, "after", res.Next)
		}
		if res.Prev != "" {
			d.Prev = pageLink(f, q.Limit, "before", res.Prev)
		}
	}
	h.render(w, r, http.StatusOK, "subscribers", page{Title: "Subscribers", Section: "subscribers", Data: d})
}

// searchDomain fills d with the people at domain, as q narrows them by
// status and topic (the bounded read of store.SearchDomain); false when
// it answered the request itself (the store failed).
func (h *Handler) searchDomain(w http.ResponseWriter, r *http.Request, d *subscriberListData, domain string, q store.SearchQuery) bool {
	subs, complete, err := h.d.People.SearchDomain(r.Context(), domain)
	if err != nil {
		h.storeAway(w, r, err)
		return false
	}
	d.People = nil
	for _, s := range subs {
		if (q.Status == "" || s.Status == q.Status) && (q.Topic == "" || slices.Contains(s.Topics, q.Topic)) {
			d.People = append(d.People, s)
		}
	}
	slices.SortFunc(d.People, func(a, b store.Subscriber) int { return strings.Compare(a.Email, b.Email) })
	d.Total, d.Domain, d.DomainPartial = int64(len(d.People)), domain, !complete
	return true
}

// subscribersPage renders the screen with the page of q, and problem
// (with email, the search's) when there is one.
func (h *Handler) subscribersPage(w http.ResponseWriter, r *http.Request, code int, q store.SubscriberQuery, email, problem string) {
	f := store.Filter{Status: q.Status, Topic: q.Topic}
	d := h.subscriberList(f)
	d.Email = email
	if h.d.People != nil {
		if q.Limit == 0 {
			q.Limit = subscribers.DefaultSubscriberPage
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
		d.People, d.Total = list.Subscribers, list.Total
		if list.Next > 0 {
			d.Next = pageLink(f, q.Limit, "after", itoa(list.Next))
		}
		if list.Prev > 0 {
			d.Prev = pageLink(f, q.Limit, "before", itoa(list.Prev))
		}
	}
	h.render(w, r, code, "subscribers", page{Title: "Subscribers", Section: "subscribers", Error: problem, Data: d})
}
