package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The people routes: the subscriber list and the overview's figures for
// the console, and the personal data requests of GDPR Art. 15 (export)
// and 17 (erase), from an admin or from the person in the preference
// centre.

// DefaultSubscriberPage is the page size of GET /api/subscribers without
// a limit.
const DefaultSubscriberPage = 50

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
	q, err := ParseSubscriberQuery(r.URL.Query(), s.cfg.Topics.Current())
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	page, err := s.deps.Store.ListSubscribers(r.Context(), q)
	if errors.Is(err, store.ErrBadQuery) {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.deps.Log.Error("list subscribers: store", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the subscriber list cannot be read just now"))
		return
	}
	out := subscriberPage{Subscribers: make([]listedSubscriber, len(page.Subscribers)), Next: page.Next, Prev: page.Prev, Total: page.Total}
	for i, sub := range page.Subscribers {
		out.Subscribers[i] = listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)}
	}
	WriteJSON(w, http.StatusOK, out)
}

// ParseSearchQuery reads a search's query string (q, status, topic,
// after, before, limit; the API's and the console's).
func ParseSearchQuery(v url.Values, set *topics.Set) (store.SearchQuery, error) {
	base := url.Values{"status": v["status"], "topic": v["topic"], "limit": v["limit"]}
	lq, err := ParseSubscriberQuery(base, set)
	if err != nil {
		return store.SearchQuery{}, err
	}
	q := store.SearchQuery{Q: v.Get("q"), Status: lq.Status, Topic: lq.Topic, After: v.Get("after"), Before: v.Get("before"), Limit: lq.Limit}
	if len(q.Q) > store.MaxSearchQuery {
		return q, fmt.Errorf("q: at most %d characters", store.MaxSearchQuery)
	}
	return q, nil
}

// searchSubscribers handles GET /api/subscribers?q=: people whose address
// or name (a word of it) begins with q.
func (s *Server) searchSubscribers(w http.ResponseWriter, r *http.Request) {
	q, err := ParseSearchQuery(r.URL.Query(), s.cfg.Topics.Current())
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
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
	WriteJSON(w, http.StatusOK, out)
}

// ParseSubscriberQuery reads a subscriber list's query string (status,
// topic, after, limit; the API's and the console's); its error says what
// is wrong with it, for a 400.
func ParseSubscriberQuery(v url.Values, set *topics.Set) (q store.SubscriberQuery, err error) {
	q = store.SubscriberQuery{Status: store.Status(v.Get("status")), Topic: v.Get("topic"), Limit: DefaultSubscriberPage}
	if q.Status != "" && !q.Status.Valid() {
		names := make([]string, len(store.Statuses))
		for i, st := range store.Statuses {
			names[i] = string(st)
		}
		return q, fmt.Errorf("unknown status %q: want one of %s", q.Status, strings.Join(names, ", "))
	}
	if _, ok := set.Topic(q.Topic); q.Topic != "" && !ok {
		return q, fmt.Errorf("unknown topic %q: want one of %s", q.Topic, strings.Join(set.IDs(), ", "))
	}
	if a := v.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return q, errors.New("after: want the id of the previous page's last subscriber (a whole number, 0 or more)")
		}
		q.After = n
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 || q.After > 0 {
			return q, errors.New("before: want the id of the next page's first subscriber (a whole number), and no after")
		}
		q.Before = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxSubscriberPage {
			return q, fmt.Errorf("limit: want 1 to %d", store.MaxSubscriberPage)
		}
		q.Limit = n
	}
	return q, nil
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
		WriteJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("days: want 0 to %d", store.MaxStatsDays)))
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
		WriteJSON(w, http.StatusNotFound, errorBody("no such topic"))
		return
	}
	all, err := s.deps.Store.Growth(r.Context(), days)
	if err != nil {
		s.deps.Log.Error("topic growth: store", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the figures cannot be read just now"))
		return
	}
	g, _ := store.TopicGrowthOf(all, topic)
	g.Topic = topic // a topic of the file the store has no counters of yet
	if g.Days == nil {
		g.Days = []store.GrowthDay{}
	}
	WriteJSON(w, http.StatusOK, g)
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
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the figures cannot be read just now"))
		return
	}
	WriteJSON(w, http.StatusOK, st)
}

// PersonalExport is the export's JSON: everything held about one person,
// their browsers and app installs masked (maskedBrowsers, maskedDevices):
// the export says which exist, and hands out no key to notify them.
type PersonalExport struct {
	ExportedAt time.Time `json:"exported_at"`
	store.PersonalData
	// Push and Devices stand in for PersonalData's, which hold the
	// secrets (the outer field is the one JSON writes).
	Push    []browserExport `json:"push_subscriptions"`
	Devices []deviceExport  `json:"devices"`
}

// browserExport is a browser as an export shows it: its push service and
// the ends of its endpoint and keys, enough to tell it from another.
type browserExport struct {
	Service   string    `json:"service"`
	Endpoint  string    `json:"endpoint"`
	P256DH    string    `json:"p256dh"`
	Auth      string    `json:"auth"`
	CreatedAt time.Time `json:"created_at"`
}

// deviceExport is an app install as an export shows it.
type deviceExport struct {
	ID        string    `json:"id"`
	Platform  string    `json:"platform"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

func maskedBrowsers(ps []store.PushSubscription) []browserExport {
	out := make([]browserExport, len(ps))
	enc := base64.RawURLEncoding
	for i, p := range ps {
		service := ""
		if u, err := url.Parse(p.Endpoint); err == nil {
			service = u.Host
		}
		out[i] = browserExport{Service: service, Endpoint: maskSecret(p.Endpoint), P256DH: maskSecret(enc.EncodeToString(p.P256DH)),
			Auth: maskSecret(enc.EncodeToString(p.Auth)), CreatedAt: p.CreatedAt}
	}
	return out
}

func maskedDevices(ds []store.Device) []deviceExport {
	out := make([]deviceExport, len(ds))
	for i, d := range ds {
		out[i] = deviceExport{ID: d.ID, Platform: d.Platform, Token: maskSecret(d.Token), CreatedAt: d.CreatedAt}
	}
	return out
}

// maskSecret shows a secret (a device token, a push endpoint or key) by
// its first and last four characters: enough to tell two apart, or to
// match one against the phone or browser it came from, and of no use to
// notify it. A secret too short to keep most of it hidden shows nothing.
func maskSecret(s string) string {
	const shown = 4
	if len(s) < 4*shown {
		return "…"
	}
	return s[:shown] + "…" + s[len(s)-shown:]
}

// pathAddress reads the {email} of the path, answering a 400 itself.
func pathAddress(w http.ResponseWriter, r *http.Request) (string, bool) {
	email, err := address.Normalize(r.PathValue("email"))
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
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
		WriteJSON(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	}
	if err != nil {
		s.deps.Log.Error("export: store", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the personal data cannot be read just now"))
		return
	}
	s.noteSubscriber(r, audit.SubscriberExport, email, "")
	WriteExport(w, pd, "")
}

// Export gathers everything held about the person with address email
// (GDPR Art. 15), stamped with the time of the export: the API's, the
// preference centre's and the console's export. store.ErrNotFound when
// there is nobody.
func (s *Server) Export(ctx context.Context, email string) (PersonalExport, error) {
	pd, err := s.deps.Store.PersonalData(ctx, email)
	if err != nil {
		return PersonalExport{}, err
	}
	return PersonalExport{ExportedAt: s.deps.Now().UTC(), PersonalData: pd, Push: maskedBrowsers(pd.Push), Devices: maskedDevices(pd.Devices)}, nil
}

// WriteExport answers the export, as a file named filename to save when
// filename is not "" (the console's export answers through it too).
func WriteExport(w http.ResponseWriter, pd PersonalExport, filename string) {
	// Personal data: no cache along the way may keep a copy.
	w.Header().Set("Cache-Control", "no-store")
	if filename != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	}
	WriteJSON(w, http.StatusOK, pd)
}

// eraseSubscriber handles DELETE /api/subscribers/{email}.
func (s *Server) eraseSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	err := s.Erase(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		WriteJSON(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	}
	if err != nil {
		s.deps.Log.Error("erase: store", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the subscriber could not be erased just now; erasing again is safe"))
		return
	}
	s.noteSubscriber(r, audit.SubscriberErased, email, "")
	w.WriteHeader(http.StatusNoContent)
}

// Erase forgets email in the store (GDPR Art. 17), with the outbox
// entries of the mails still waiting for them, then deletes those tasks
// from the queue (their payloads hold the address): the API's, the
// preference centre's and the console's erase. A task already running
// finds no subscriber at its re-check and sends nothing.
// store.ErrNotFound when there is nobody.
func (s *Server) Erase(ctx context.Context, email string) error {
	pending := tasks.PersonTasks(email, s.cfg.Topics.Current().Sequence)
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.ID
	}
	sub, err := s.deps.Store.Erase(ctx, email, ids...)
	if err != nil {
		return err
	}
	s.deleteTasks(pending)
	s.deps.Log.Info("erase: subscriber erased", "subscriber", sub.ID)
	return nil
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
	WriteExport(w, pd, "newsletter-personal-data.json")
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
			WriteJSON(w, http.StatusBadRequest, errorBody(`erasing cannot be undone: send "confirm": "yes" to erase`))
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
		WriteJSON(w, http.StatusOK, map[string]string{"status": "erased"})
		return
	}
	message(w, http.StatusOK, "Your data is erased",
		"We deleted your address, your name and everything we kept about you. We send you nothing more.",
		"To get our mail again one day, subscribe on the front page.")
}
