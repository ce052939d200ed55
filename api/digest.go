package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/mdlimit"
	"github.com/newsletter/newsletter/internal/textcheck"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func (s *Server) adminRoutes() {
	s.mux.Handle("POST /api/items", s.Editor(http.HandlerFunc(s.addItem)))
	s.mux.Handle("PUT /api/items/{id}", s.Editor(http.HandlerFunc(s.putItem)))
	s.mux.Handle("DELETE /api/items/{id}", s.Editor(http.HandlerFunc(s.deleteItem)))
	s.mux.Handle("POST /api/events", s.Editor(http.HandlerFunc(s.addEvent)))
	s.mux.Handle("POST /api/digest/run", s.Admin(http.HandlerFunc(s.runDigest)))
	s.mux.Handle("GET /api/digests/{period}", s.Viewer(http.HandlerFunc(s.digestStatus)))
}

// readAdminJSON reads a small JSON object with the fields of want; it
// answers the error itself and returns nil then.
func (s *Server) readAdminJSON(w http.ResponseWriter, r *http.Request, want fields, optional bool) input {
	if optional && r.ContentLength == 0 {
		return input{}
	}
	in, err := s.readInput(w, r, want, true)
	if errors.Is(err, errTooLarge) {
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody(err.Error()))
		return nil
	}
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return nil
	}
	return in
}

// addItem handles POST /api/items {title,url,summary}.
func (s *Server) addItem(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, itemFields, false)
	if in == nil {
		return
	}
	it, err := store.CheckItem(store.Item{Title: in.get("title"), URL: in.get("url"), Summary: in.get("summary")})
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	it, err = s.deps.Store.AddItem(r.Context(), it)
	if err != nil {
		s.deps.Log.Error("add item", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the item"))
		return
	}
	s.note(r, audit.ItemAdded, "item:"+strconv.FormatInt(it.ID, 10), "")
	webjson.Write(w, http.StatusCreated, it)
}

// itemOf is the item of the route's {id}; it answers a bad or unknown
// one itself.
func (s *Server) itemOf(w http.ResponseWriter, r *http.Request) (store.Item, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var it store.Item
	if err == nil && id > 0 {
		it, err = s.deps.Store.Item(r.Context(), id)
	} else {
		err = store.ErrNoItem
	}
	switch {
	case errors.Is(err, store.ErrNoItem):
		webjson.Write(w, http.StatusNotFound, errorBody("no such item"))
		return it, false
	case err != nil:
		s.deps.Log.Error("load item", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not load the item"))
		return it, false
	}
	return it, true
}

// putItem handles PUT /api/items/{id} {title,url,summary}: the item's
// text replaced (its topic and time stay), checked as a new one is.
func (s *Server) putItem(w http.ResponseWriter, r *http.Request) {
	it, ok := s.itemOf(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, itemFields, false)
	if in == nil {
		return
	}
	it.Title, it.URL, it.Summary = in.get("title"), in.get("url"), in.get("summary")
	it, err := store.CheckItem(it)
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	it, err = s.deps.Store.UpdateItem(r.Context(), it)
	if errors.Is(err, store.ErrNoItem) {
		webjson.Write(w, http.StatusNotFound, errorBody("no such item"))
		return
	}
	if err != nil {
		s.deps.Log.Error("update item", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the item"))
		return
	}
	s.note(r, audit.ItemUpdated, "item:"+strconv.FormatInt(it.ID, 10), "")
	webjson.Write(w, http.StatusOK, it)
}

// deleteItem handles DELETE /api/items/{id}: 204.
func (s *Server) deleteItem(w http.ResponseWriter, r *http.Request) {
	it, ok := s.itemOf(w, r)
	if !ok {
		return
	}
	err := s.deps.Store.DeleteItem(r.Context(), it.ID)
	if err != nil && !errors.Is(err, store.ErrNoItem) { // gone meanwhile: gone all the same
		s.deps.Log.Error("delete item", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not delete the item"))
		return
	}
	s.note(r, audit.ItemDeleted, "item:"+strconv.FormatInt(it.ID, 10), it.Title)
	w.WriteHeader(http.StatusNoContent)
}

// addEvent handles POST /api/events: {email,title,url} notifies one
// person (their bundled events mail, and their browsers), {topic,title,url}
// every active reader of a topic (a mail each, and their browsers). Either
// way it queues one ingress task; the worker's fan-out enqueues a task per
// person and channel in that channel's lane. With an Idempotency-Key the
// event is queued once for the key (eventkey.go).
func (s *Server) addEvent(w http.ResponseWriter, r *http.Request) {
	key, msg := idempotencyKey(r.Header)
	if msg != "" {
		webjson.Write(w, http.StatusBadRequest, errorBody(msg))
		return
	}
	in := s.readAdminJSON(w, r, eventFields, false)
	if in == nil {
		return
	}
	ev, msg := s.checkEvent(in)
	if msg != "" {
		webjson.Write(w, http.StatusBadRequest, errorBody(msg))
		return
	}
	if key != "" {
		s.queueEventOnce(w, r, key, in, ev)
		return
	}
	ev.p.ID = tasks.NewEventID()
	code, answer := s.queueEvent(r, ev)
	webjson.Write(w, code, answer)
}

// checkedEvent is a POST /api/events whose body passed: the fan-out to
// queue (its ID still to give) and, for one person, their address.
type checkedEvent struct {
	p     tasks.FanoutPayload
	email string
}

// checkEvent reads an event's body; a message says what is wrong. It
// reads nothing from Redis: every 400 is answered before an
// Idempotency-Key is reserved.
func (s *Server) checkEvent(in input) (checkedEvent, string) {
	title, link := strings.TrimSpace(in.get("title")), strings.TrimSpace(in.get("url"))
	if title == "" || !textcheck.OneLine(title, textcheck.MaxTitle) || !textcheck.HTTPURL(link) {
		return checkedEvent{}, fmt.Sprintf("want a title (one line, at most %d characters) and an http(s) url", textcheck.MaxTitle)
	}
	// Every event may be pushed to browsers and app installs: a URL no
	// push message can carry would make each reader's push a dead letter.
	if err := s.pushable(title, link); err != nil {
		return checkedEvent{}, "the url is too long for a push notification: " + err.Error()
	}
	channels, msg := eventChannels(in["channels"])
	if msg != "" {
		return checkedEvent{}, msg
	}
	if msg = s.textable(title, link, channels); msg != "" {
		return checkedEvent{}, msg
	}
	ev := checkedEvent{p: tasks.FanoutPayload{Title: title, URL: link, At: s.deps.Now().UTC(), Channels: channels}}
	if msg = s.eventInbox(in, &ev.p); msg != "" {
		return checkedEvent{}, msg
	}
	rawEmail, topic := in.get("email"), strings.TrimSpace(in.get("topic"))
	switch {
	case rawEmail != "" && topic != "", rawEmail == "" && topic == "":
		return checkedEvent{}, "want either an email (one person) or a topic (its readers)"
	case topic != "":
		if _, ok := s.cfg.Topics.Current().Topic(topic); !ok {
			return checkedEvent{}, "unknown topic " + strconv.Quote(topic) + ": want one of " + strings.Join(s.cfg.Topics.Current().IDs(), ", ")
		}
		ev.p.Topic = topic
	default:
		email, err := address.Normalize(rawEmail)
		if err != nil {
			return checkedEvent{}, err.Error()
		}
		ev.email = email
	}
	return ev, ""
}

// queueEvent queues a checked event under ev.p.ID and says the answer:
// 202 (queued, or not subscribed: nothing queued) or 503. The fan-out's
// TaskID is the event id: the same id queued again (an Idempotency-Key's
// retry after its holder died) is a conflict, and queued all the same.
func (s *Server) queueEvent(r *http.Request, ev checkedEvent) (int, map[string]string) {
	p := ev.p
	answer := map[string]string{"id": p.ID, "status": "queued"}
	if p.Topic != "" {
		answer["topic"] = p.Topic
	} else {
		answer["email"] = ev.email
		// The task names the person by id, never by address: it is kept a
		// day after it ran, and an erasure must leave no address behind.
		sub, err := s.deps.Store.Get(r.Context(), ev.email)
		if errors.Is(err, store.ErrNotFound) {
			// Nobody to notify, as for a person who left: said, not queued.
			answer["status"] = "not subscribed"
			s.noteSubscriber(r, audit.EventPosted, ev.email, p.ID)
			return http.StatusAccepted, answer
		}
		if err != nil {
			s.deps.Log.Error("event: read the subscriber", "err", err)
			return http.StatusServiceUnavailable, errorBody("could not queue the event, please retry")
		}
		p.SubscriberID = sub.ID
	}
	if _, err := s.deps.Queue.EnqueueContext(r.Context(), tasks.NewFanout(p)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		s.deps.Log.Error("enqueue event", "err", err)
		return http.StatusServiceUnavailable, errorBody("could not queue the event, please retry")
	}
	if p.SubscriberID > 0 {
		s.noteSubscriber(r, audit.EventPosted, ev.email, p.ID)
	} else {
		s.note(r, audit.EventPosted, "topic:"+p.Topic, p.ID)
	}
	return http.StatusAccepted, answer
}

// runDigest handles POST /api/digest/run {"period":…}: the same as the
// cron run, so a period is planned once whoever starts it.
func (s *Server) runDigest(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, digestRunFields, true)
	if in == nil {
		return
	}
	period := in.get("period")
	if period == "" {
		period = tasks.Period(s.deps.Now())
	}
	if err := s.deps.Settings.BulkReady(r.Context()); err != nil {
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
		return
	}
	dup, err := tasks.EnqueueDigestPlan(r.Context(), s.deps.Queue, period)
	if errors.Is(err, tasks.ErrInvalidPeriod) {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.deps.Log.Error("enqueue digest plan", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not queue the digest, please retry"))
		return
	}
	status := tasks.DigestRunStatus(dup)
	s.note(r, audit.DigestRun, "digest:"+period, status)
	webjson.Write(w, http.StatusAccepted, map[string]string{"period": period, "status": status})
}

// digestStatus handles GET /api/digests/{period}.
func (s *Server) digestStatus(w http.ResponseWriter, r *http.Request) {
	period := r.PathValue("period")
	if !tasks.ValidPeriod(period) {
		webjson.Write(w, http.StatusBadRequest, errorBody("not a period"))
		return
	}
	run, err := s.deps.Store.DigestRun(r.Context(), period)
	if errors.Is(err, store.ErrNoRun) {
		webjson.Write(w, http.StatusNotFound, errorBody("no digest run for "+period))
		return
	}
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	webjson.Write(w, http.StatusOK, run)
}

// eventChannels reads an event's "channels": each a built-in channel or
// one added through the seam (choosable), none twice; none given: every
// channel. A message says what is wrong.
func eventChannels(list []string) ([]string, string) {
	var out []string
	for _, c := range list {
		// Exactly a channel's name: " email" is not one (as a case
		// variant is not), and a long name is quoted by its start only.
		if !slices.Contains(choosable(), c) {
			return nil, fmt.Sprintf("unknown channel %q: want some of %s", shortened(c, 40), strings.Join(choosable(), ", "))
		}
		if slices.Contains(out, c) {
			return nil, fmt.Sprintf("channel %q is named twice", c)
		}
		out = append(out, c)
	}
	if list != nil && len(out) == 0 {
		return nil, "channels is empty: leave it out for every channel"
	}
	return out, ""
}

// maxEventBody bounds an event's Markdown body, in characters: a
// notification's few paragraphs, not an issue.
const maxEventBody = 4000

// eventBody checks an event's Markdown body ("body"): at most
// maxEventBody characters, within the renderer's bounds (mdlimit).
func eventBody(body string) (string, string) {
	body = strings.TrimSpace(body)
	if n := utf8.RuneCountInString(body); n > maxEventBody {
		return "", fmt.Sprintf("body: %d characters, at most %d", n, maxEventBody)
	}
	if !utf8.ValidString(body) {
		return "", "body: not UTF-8"
	}
	if err := mdlimit.Check(body); err != nil {
		return "", "body: " + err.Error()
	}
	return body, ""
}

// textable says what is wrong with texting an event: with SMS on, any
// reader who chose texts may be texted the title and link, and one over
// the cap would be a dead letter each.
func (s *Server) textable(title, link string, channels []string) string {
	if s.cfg.SMSAuthToken == "" || (len(channels) > 0 && !slices.Contains(channels, store.ChannelSMS)) {
		return ""
	}
	if err := s.deps.Checks.SMSText(title+" "+link, s.cfg.SMSMaxSegments); err != nil {
		return "too long for a text message (title and url): " + err.Error() + `; shorten it, or leave SMS out with "channels"`
	}
	return ""
}

// eventInbox reads an event's fields for the inbox into p: its Markdown
// "body" and "email_if_unread_after"; a message says what is wrong.
func (s *Server) eventInbox(in input, p *tasks.FanoutPayload) string {
	var msg string
	if p.Markdown, msg = eventBody(in.get("body")); msg != "" {
		return msg
	}
	p.EmailIfUnreadAfter, msg = s.unreadAfter(in.get("email_if_unread_after"), p.Channels)
	return msg
}

// Bounds of "email_if_unread_after".
const (
	minUnreadAfter = 10 * time.Second
	maxUnreadAfter = 7 * 24 * time.Hour
)

// unreadAfter reads "email_if_unread_after" (a Go duration: "10m",
// "2h"): the event must be able to reach a channel that tracks reads and
// e-mail, both.
func (s *Server) unreadAfter(raw string, channels []string) (time.Duration, string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, ""
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < minUnreadAfter || d > maxUnreadAfter {
		return 0, fmt.Sprintf("email_if_unread_after: want a duration from %s to %s, such as \"10m\" or \"2h\"", "10s", "168h")
	}
	if len(s.cfg.ReadTrackers) == 0 {
		return 0, "email_if_unread_after: no channel here tracks reads (the inbox is off: NEWSLETTER_INBOX_SECRET)"
	}
	if len(channels) > 0 && (!slices.Contains(channels, store.ChannelEmail) ||
		!slices.ContainsFunc(channels, func(c string) bool { return slices.Contains(s.cfg.ReadTrackers, c) })) {
		return 0, fmt.Sprintf("email_if_unread_after: channels must name email and one of %s", strings.Join(s.cfg.ReadTrackers, ", "))
	}
	return d, ""
}

// shortened is s cut to at most n bytes at a rune boundary, with "…" when
// cut: a client's bad value quoted back without all of it.
func shortened(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
