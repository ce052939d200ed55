package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// unsubscribePage handles GET /unsubscribe?token=: a page with a button.
// A GET never unsubscribes, because mail scanners follow links. Without a
// token it is the unsubscribe form, where a person types their address.
func (s *Server) unsubscribePage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	if tok == "" {
		s.leaveForm(w)
		return
	}
	who, err := s.deps.Signer.Verify(token.Unsubscribe, tok)
	if err != nil {
		message(w, http.StatusBadRequest, "This link is not valid", "Copy the whole unsubscribe link from the mail.")
		return
	}
	email, err := s.addressOf(r.Context(), who)
	if errors.Is(err, store.ErrNotFound) {
		s.ended(w, "")
		return
	}
	if err != nil {
		s.deps.Log.Error("unsubscribe: store", "err", err)
		message(w, http.StatusServiceUnavailable, "Please try again", "We could not load your subscription just now.")
		return
	}
	renderPage(w, http.StatusOK, "unsubscribe", pageData{Title: "Unsubscribe", Email: email, Token: tok, Topic: s.topicName(who.Topic)})
}

// leaveForm is the unsubscribe form: an address, posted to POST
// /unsubscribe, which does what NEWSLETTER_UNSUBSCRIBE_BY_EMAIL says.
func (s *Server) leaveForm(w http.ResponseWriter) {
	// The form's post must name this page's origin (POST /unsubscribe
	// refuses one from another site, and a browser that sends no
	// Sec-Fetch-Site shows it only in Origin): no-referrer, which the token
	// pages have, would make that Origin "null". Nothing secret is in
	// this page's URL.
	w.Header().Set("Referrer-Policy", "same-origin")
	what := "We stop all mail to it at once."
	if s.cfg.UnsubscribeByEmail == UnsubscribeConfirm {
		what = "We mail a link to it: open that mail and press the button, and no more mail goes to it."
	}
	renderPage(w, http.StatusOK, "leave", pageData{Title: "Unsubscribe", Lines: []string{
		"Type the address you subscribed with. " + what,
		"The unsubscribe link at the foot of our mails does the same without typing.",
	}})
}

// topicName is the name of topic id ("" for none; the id itself for a
// topic the file no longer has).
func (s *Server) topicName(id string) string {
	if t, ok := s.cfg.Topics.Current().Topic(id); ok {
		return t.Name
	}
	return id
}

// InertToken is the token of a test mail's personal links (issue test
// sends): it names nobody, and its one-click unsubscribe answers 200 and
// does nothing.
const InertToken = "test"

// unsubscribe handles POST /unsubscribe in its three forms: RFC 8058
// one-click (token in the query, answered 200 with no redirect), the button
// of the page (token in the body), and an address (form or JSON).
func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request) {
	oneClick := r.URL.Query().Get("token")
	if oneClick == InertToken {
		// A test mail's one-click: a mail client that posts it must
		// see it done (200), and nobody is unsubscribed.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("a test mail: nothing to unsubscribe\n"))
		return
	}
	in, err := s.readInput(w, r, unsubscribeFields, false)
	if errors.Is(err, errTooLarge) {
		fail(w, r, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	if err != nil && oneClick == "" {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var email, topic, undo string
	var issue int64 // the issue whose mail the link came in (0: another mail, or none)
	switch tok := firstNonEmpty(oneClick, in.get("token")); {
	case tok != "":
		var ok bool
		if email, topic, issue, undo, ok = s.unsubscribeToken(w, r, tok, oneClick != ""); !ok {
			return
		}
	default:
		// By address alone: anyone can type any address, so this path
		// is limited per client, refused from other sites' pages, and,
		// in confirm mode, only mails a link to the address.
		if !s.mailRequestAllowed(w, r, "cross-site request refused: use the link in any of our mails") {
			return
		}
		if email, err = address.Normalize(in.get("email")); err != nil {
			fail(w, r, http.StatusBadRequest, "please enter a valid e-mail address")
			return
		}
		if s.cfg.UnsubscribeByEmail == UnsubscribeConfirm {
			s.mailUnsubscribeLink(w, r, email)
			return
		}
	}
	leave := func(ctx context.Context, email string) error { return s.endFrom(ctx, email, issue) }
	if topic != "" {
		leave = func(_ context.Context, email string) error { return s.leaveTopic(r, email, topic, issue) }
	}
	if err := leave(r.Context(), email); err != nil {
		s.deps.Log.Error("unsubscribe: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not unsubscribe you just now, please try again")
		return
	}
	s.unsubscribed(w, r, oneClick != "", email, topic, undo)
}

// unsubscribeToken reads an unsubscribe link's token: whom it names,
// the topic it leaves and the issue it came in, and (for the page's
// button, not a one-click) the undo's token. It answers itself when the
// request ends here (ok false).
func (s *Server) unsubscribeToken(w http.ResponseWriter, r *http.Request, tok string, oneClick bool) (email, topic string, issue int64, undo string, ok bool) {
	// A token from a mail of one topic leaves that topic only; one
	// without a topic (older mails, the link mailed on request) leaves
	// everything.
	who, err := s.deps.Signer.Verify(token.Unsubscribe, tok)
	if err != nil {
		fail(w, r, http.StatusBadRequest, "this unsubscribe link is not valid")
		return "", "", 0, "", false
	}
	sub, err := s.subscriberOf(r.Context(), who)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Nobody left to unsubscribe: done, as for an address that is
		// not on the list.
		s.unsubscribed(w, r, oneClick, "", who.Topic, "")
		return "", "", 0, "", false
	case err != nil:
		s.deps.Log.Error("unsubscribe: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not unsubscribe you just now, please try again")
		return "", "", 0, "", false
	}
	if !oneClick {
		undo = s.undoToken(sub, leaving(sub, who.Topic))
	}
	return sub.Email, who.Topic, who.Issue, undo, true
}

// leaving are the topics an unsubscribe through a link of topic ("":
// everything) takes from sub: what its undo gives back.
func leaving(sub store.Subscriber, topic string) []string {
	switch {
	case sub.Status != store.Active:
		return nil
	case topic == "":
		return sub.Topics
	case slices.Contains(sub.Topics, topic):
		return []string{topic}
	}
	return nil
}

// unsubscribed answers a done unsubscribe: RFC 8058 reads only the status
// of a one-click; the others say what happened (email "" for a link whose
// subscriber is no longer on the list), a page with the button of undo
// (a resubscribe token; "" : none).
func (s *Server) unsubscribed(w http.ResponseWriter, r *http.Request, oneClick bool, email, topic, undo string) {
	whom := "you"
	if email != "" {
		whom = email
	}
	switch {
	case oneClick:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("unsubscribed\n"))
	case wantsJSON(r):
		body := map[string]string{"status": string(store.Unsubscribed)}
		if email != "" {
			body["email"] = email
		}
		if topic != "" {
			body["topic"] = topic
		}
		webjson.Write(w, http.StatusAccepted, body)
	case topic != "":
		renderPage(w, http.StatusAccepted, "message", pageData{Title: "You are unsubscribed from " + s.topicName(topic), Undo: undo, Lines: []string{
			"We will not send " + s.topicName(topic) + " to " + whom + " any more. Anything else you chose goes on; the link at the foot of any of our mails changes it."}})
	default:
		renderPage(w, http.StatusAccepted, "message", pageData{Title: "You are unsubscribed", Undo: undo, Lines: []string{"We will not send any more mail to " + whom + "."}})
	}
}

// leaveTopic turns one topic off. Leaving the sequence's topic (or the
// last one, which ends the subscription) also deletes the waiting step;
// an address that is not active has nothing to leave. issue, when not 0,
// is the issue whose mail's link was followed: the store counts the
// leaving in that issue's report.
func (s *Server) leaveTopic(r *http.Request, email, topic string, issue int64) error {
	seq := s.cfg.Topics.Current().Sequence
	sub, err := s.deps.Store.LeaveTopicFrom(r.Context(), email, topic, issue, tasks.SequenceCancel(email, seq))
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotActive) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.Contains(sub.Topics, seq.Topic) {
		s.deleteTasks(tasks.SequenceTasks(email, seq))
	}
	s.notifyLeft(r.Context(), sub)
	return nil
}

// ownPage tells a post from our own page (or from a program, which sends
// no Origin and could forge one anyway) from a form on another site: a
// browser always names the page's origin on a cross-site POST.
//
// A browser's own verdict comes first: Sec-Fetch-Site, which no page can
// set. The token pages send Referrer-Policy: no-referrer, under which a
// browser posts their forms with "Origin: null" and no Referer.
func (s *Server) ownPage(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "same-site", "cross-site":
		return false
	}
	if r.Header.Get("Origin") == "" && r.Header.Get("Referer") == "" {
		return wantsJSON(r) // a form post without either is not a browser we know
	}
	return sameOrigin(r, s.cfg.Origin)
}

// mailUnsubscribeLink queues the one-click link to email and answers the
// same whether or not the address is on the list, and whether or not the
// link is sent: one per mailbox within the confirmation cooldown (and as
// many a day as confirmations), so this form cannot flood an inbox either.
func (s *Server) mailUnsubscribeLink(w http.ResponseWriter, r *http.Request, email string) {
	ctx := r.Context()
	send, err := s.deps.Store.TakeHold(ctx, store.HoldUnsubscribe, email, s.cfg.ConfirmHold)
	if err != nil {
		s.deps.Log.Error("unsubscribe: the mailbox's allowance", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not send the link just now, please try again")
		return
	}
	if !send {
		s.deps.Log.Info("unsubscribe: link held by the cooldown", "domain", address.Domain(email))
	} else if _, err := s.deps.Queue.EnqueueContext(ctx, tasks.NewUnsubscribeLink(email)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		s.deps.Log.Error("unsubscribe: queue the link", "err", err)
		// Nothing was sent: the person's next try must not be held.
		if err := s.deps.Store.GiveBackHold(ctx, store.HoldUnsubscribe, email); err != nil {
			s.deps.Log.Warn("unsubscribe: give the allowance back", "err", err)
		}
		fail(w, r, http.StatusServiceUnavailable, "we could not send the link just now, please try again")
		return
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusAccepted, map[string]string{"email": email, "status": "link sent"})
		return
	}
	message(w, http.StatusAccepted, "Check your inbox",
		"If "+email+" is subscribed, a mail with a link to unsubscribe is on its way. Open it and press the button.")
}

// end marks the subscription inactive first (the handlers' re-check stops
// anything already queued), then deletes the waiting welcome and
// confirmation. DeleteTask fails on a running task; the re-check covers it.
func (s *Server) end(ctx context.Context, email string) error { return s.endFrom(ctx, email, 0) }

// endFrom is end through a link of issue's mail (0: none)
// (subscribers.Service.EndFrom).
func (s *Server) endFrom(ctx context.Context, email string, issue int64) error {
	return s.subs.EndFrom(ctx, email, issue)
}

// deleteTasks deletes waiting tasks of a person who left
// (subscribers.Service.DeleteTasks).
func (s *Server) deleteTasks(refs []tasks.TaskRef) { s.subs.DeleteTasks(refs) }

// notifyLeft queues subscriber.unsubscribed when sub's subscription just
// ended (subscribers.Service.NotifyLeft).
func (s *Server) notifyLeft(ctx context.Context, sub store.Subscriber) { s.subs.NotifyLeft(ctx, sub) }

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// mailRequestAllowed is the gate of a request that mails a link to an
// address (an unsubscribe by typed address, a fresh preferences link):
// limited per client and refused from other sites' pages, answering the
// refusal itself (crossSite is its message for the second).
func (s *Server) mailRequestAllowed(w http.ResponseWriter, r *http.Request, crossSite string) bool {
	if s.leaving != nil {
		if ok, wait := s.leaving.Allow(s.cfg.Clients.Key(r)); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			fail(w, r, http.StatusTooManyRequests, "too many requests from your address, try again in a minute")
			return false
		}
	}
	if !s.ownPage(r) {
		fail(w, r, http.StatusForbidden, crossSite)
		return false
	}
	return true
}
