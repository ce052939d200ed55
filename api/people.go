package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// The people routes: the subscriber list and the overview's figures for
// the console, and the personal data requests of GDPR Art. 15 (export)
// and 17 (erase), from an admin or from the person in the preference
// centre.

func (s *Server) peopleRoutes() {
	m := s.mux
	m.Handle("GET /api/subscribers", s.Viewer(http.HandlerFunc(s.listSubscribers)))
	m.Handle("GET /api/subscribers/{email}/export", s.Admin(http.HandlerFunc(s.exportSubscriber)))
	m.Handle("DELETE /api/subscribers/{email}", s.Admin(http.HandlerFunc(s.eraseSubscriber)))
	m.Handle("GET /api/stats", s.Viewer(http.HandlerFunc(s.stats)))
	m.Handle("GET /api/topics/{id}/growth", s.Viewer(http.HandlerFunc(s.topicGrowth)))
	m.HandleFunc("POST /preferences/export", tokenPage(s.preferencesExport))
	m.HandleFunc("POST /preferences/erase", tokenPage(s.preferencesErase))
}

// listedSubscriber is one subscriber of a list page: the id (the paging
// cursor) beside what GET /api/subscribers/{email} shows.
type listedSubscriber struct {
	ID int64 `json:"id"`
	subscriberView
}

type subscriberPage struct {
	Subscribers []listedSubscriber `json:"subscribers"`
	// Next is the after of the next page; absent on the last. Prev is
	// the before of the page before; absent on the first.
	Next int64 `json:"next,omitempty"`
	Prev int64 `json:"prev,omitempty"`
	// Total is how many the status and topic select.
	Total int64 `json:"total"`
}

// searchPage is a page of a search (q): its cursors are the index's
// (opaque strings, given back as after or before).
type searchPage struct {
	Subscribers []listedSubscriber `json:"subscribers"`
	Next        string             `json:"next,omitempty"`
	Prev        string             `json:"prev,omitempty"`
	// Total counts the index entries that match (a person found by the
	// address and by a name's word counts twice, listed once); absent
	// when a status or topic narrows the search.
	Total *int64 `json:"total,omitempty"`
}

// listSubscribers handles GET /api/subscribers?q=&status=&topic=&after=&before=&limit=.
func (s *Server) listSubscribers(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("q") != "" {
		s.searchSubscribers(w, r)
		return
	}
	q, err := subscribers.ParseSubscriberQuery(r.URL.Query(), s.cfg.Topics.Current())
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	page, err := s.deps.Store.ListSubscribers(r.Context(), q)
	if errors.Is(err, store.ErrBadQuery) {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.deps.Log.Error("list subscribers: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the subscriber list cannot be read just now"))
		return
	}
	out := subscriberPage{Subscribers: make([]listedSubscriber, len(page.Subscribers)), Next: page.Next, Prev: page.Prev, Total: page.Total}
	for i, sub := range page.Subscribers {
		out.Subscribers[i] = listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)}
	}
	webjson.Write(w, http.StatusOK, out)
}

// searchSubscribers handles GET /api/subscribers?q=: people whose address
// or name (a word of it) begins with q.
func (s *Server) searchSubscribers(w http.ResponseWriter, r *http.Request) {
	q, err := subscribers.ParseSearchQuery(r.URL.Query(), s.cfg.Topics.Current())
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	page, err := s.deps.Store.Search(r.Context(), q)
	if err != nil {
		s.answerListError(w, "search", err)
		return
	}
	out := searchPage{Subscribers: make([]listedSubscriber, len(page.Subscribers)), Next: page.Next, Prev: page.Prev}
	if page.Total >= 0 {
		out.Total = &page.Total
	}
	for i, sub := range page.Subscribers {
		out.Subscribers[i] = listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)}
	}
	webjson.Write(w, http.StatusOK, out)
}

// statsDays reads ?days= (default and most: store.MaxStatsDays),
// answering a bad one itself.
func statsDays(w http.ResponseWriter, r *http.Request) (int, bool) {
	d := r.URL.Query().Get("days")
	if d == "" {
		return store.MaxStatsDays, true
	}
	n, err := strconv.Atoi(d)
	if err != nil || n < 0 || n > store.MaxStatsDays {
		webjson.Write(w, http.StatusBadRequest, errorBody(fmt.Sprintf("days: want 0 to %d", store.MaxStatsDays)))
		return 0, false
	}
	return n, true
}

// topicGrowth handles GET /api/topics/{id}/growth?days=: the topic's new
// active subscriptions a day by source (store.TopicGrowth).
func (s *Server) topicGrowth(w http.ResponseWriter, r *http.Request) {
	days, ok := statsDays(w, r)
	if !ok {
		return
	}
	topic := r.PathValue("id")
	if _, known := s.cfg.Topics.Current().Topic(topic); !known {
		webjson.Write(w, http.StatusNotFound, errorBody("no such topic"))
		return
	}
	all, err := s.deps.Store.Growth(r.Context(), days)
	if err != nil {
		s.deps.Log.Error("topic growth: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the figures cannot be read just now"))
		return
	}
	g, _ := store.TopicGrowthOf(all, topic)
	g.Topic = topic // a topic of the file the store has no counters of yet
	if g.Days == nil {
		g.Days = []store.GrowthDay{}
	}
	webjson.Write(w, http.StatusOK, g)
}

// stats handles GET /api/stats?days=: the console overview's figures.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	days, ok := statsDays(w, r)
	if !ok {
		return
	}
	st, err := s.deps.Store.Stats(r.Context(), days)
	if err != nil {
		s.deps.Log.Error("stats: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the figures cannot be read just now"))
		return
	}
	webjson.Write(w, http.StatusOK, st)
}

// pathAddress reads the {email} of the path, answering a 400 itself.
func pathAddress(w http.ResponseWriter, r *http.Request) (string, bool) {
	email, err := address.Normalize(r.PathValue("email"))
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return "", false
	}
	return email, true
}

// exportSubscriber handles GET /api/subscribers/{email}/export.
func (s *Server) exportSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	pd, err := s.Export(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	}
	if err != nil {
		s.deps.Log.Error("export: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the personal data cannot be read just now"))
		return
	}
	s.noteSubscriber(r, audit.SubscriberExport, email, "")
	subscribers.WriteExport(w, pd, "")
}

// eraseSubscriber handles DELETE /api/subscribers/{email}.
func (s *Server) eraseSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	err := s.Erase(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	}
	if err != nil {
		s.deps.Log.Error("erase: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the subscriber could not be erased just now; erasing again is safe"))
		return
	}
	s.noteSubscriber(r, audit.SubscriberErased, email, "")
	w.WriteHeader(http.StatusNoContent)
}

// noteSelf records a request the person made themselves from the
// preference centre: no token, so the actor is the person, by the keyed
// hash of their address as the target is.
func (s *Server) noteSelf(r *http.Request, action, email string) {
	if s.deps.Audit == nil {
		return
	}
	target := s.deps.Audit.Subscriber(email)
	// Logged and counted by the Trail, as note's.
	_ = s.deps.Audit.Note(r.Context(), audit.Entry{Actor: target, Role: "self", Action: action, Target: target, Detail: "from the preference centre"})
}

// preferencesExport handles POST /preferences/export: the person's own
// data as a file, from the preference centre.
func (s *Server) preferencesExport(w http.ResponseWriter, r *http.Request) {
	// Only our own page may post the token (preferencesPost): another
	// site must not make a visitor's browser fetch their data.
	_, _, _, sub, ok := s.preferencesPost(w, r, confirmFields)
	if !ok {
		return
	}
	pd, err := s.Export(r.Context(), sub.Email)
	if errors.Is(err, store.ErrNotFound) {
		s.ended(w, "")
		return
	}
	if err != nil {
		s.deps.Log.Error("preferences export: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not gather your data just now, please try again")
		return
	}
	s.noteSelf(r, audit.SubscriberExport, sub.Email)
	subscribers.WriteExport(w, pd, "newsletter-personal-data.json")
}

// preferencesErase handles POST /preferences/erase: the first post (from
// the preference centre's button) shows what erasing means and asks
// again; the second, with confirm=yes, erases. GET and HEAD have no
// route: a link scanner never erases anyone.
func (s *Server) preferencesErase(w http.ResponseWriter, r *http.Request) {
	in, tok, _, sub, ok := s.preferencesPost(w, r, eraseFields)
	if !ok {
		return
	}
	if in.get("confirm") != "yes" {
		if wantsJSON(r) {
			webjson.Write(w, http.StatusBadRequest, errorBody(`erasing cannot be undone: send "confirm": "yes" to erase`))
			return
		}
		renderPage(w, http.StatusOK, "erase", pageData{Title: "Erase your data", Email: sub.Email, Token: tok})
		return
	}
	err := s.Erase(r.Context(), sub.Email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.deps.Log.Error("preferences erase: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not erase your data just now, please try again")
		return
	}
	if err == nil {
		s.noteSelf(r, audit.SubscriberErased, sub.Email)
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusOK, map[string]string{"status": "erased"})
		return
	}
	message(w, http.StatusOK, "Your data is erased",
		"We deleted your address, your name and everything we kept about you. We send you nothing more.",
		"To get our mail again one day, subscribe on the front page.")
}

// Export gathers everything held about the person with address email
// (subscribers.Service.Export: the API's, the preference centre's and
// the console's export).
func (s *Server) Export(ctx context.Context, email string) (subscribers.PersonalExport, error) {
	return s.subs.Export(ctx, email)
}

// Erase forgets email and their waiting tasks (subscribers.Service.Erase:
// the API's, the preference centre's and the console's erase).
func (s *Server) Erase(ctx context.Context, email string) error { return s.subs.Erase(ctx, email) }
