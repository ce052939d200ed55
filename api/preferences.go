package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// The preference centre: the link at the foot of every bulk mail opens it
// with a preferences token (which can do nothing else). A person sees
// their topics, name and time zone, changes them, or leaves everything.
// GET and HEAD change nothing; the POST carries the token in its body and
// must come from our own page.

// preferencesToken verifies a preferences token, answering the error
// page itself.
func (s *Server) preferencesToken(w http.ResponseWriter, tok string) (token.Subject, bool) {
	who, err := s.deps.Signer.Verify(token.Preferences, tok)
	if errors.Is(err, token.ErrExpired) {
		// The page offers a fresh link (POST /preferences/fresh), and
		// shows nothing of the person.
		renderPage(w, http.StatusBadRequest, "message", pageData{Title: "This link has expired", Fresh: tok, Lines: []string{
			"A preferences link works for 90 days after its mail. The link at the foot of a more recent mail of ours opens your preferences, or we can mail you a fresh one."}})
		return token.Subject{}, false
	}
	if err != nil {
		message(w, http.StatusBadRequest, "This link is not valid", "Copy the whole link from the foot of one of our mails.")
		return token.Subject{}, false
	}
	return who, true
}

// preferencesOf loads the subscriber a preferences token names, answering
// the page itself when it cannot (ok false): one no longer on the list
// gets the page of an ended subscription.
func (s *Server) preferencesOf(w http.ResponseWriter, r *http.Request, who token.Subject) (sub store.Subscriber, ok bool) {
	sub, err := s.subscriberOf(r.Context(), who)
	if errors.Is(err, store.ErrNotFound) {
		s.ended(w, who.Email)
		return store.Subscriber{}, false
	}
	if err != nil {
		s.deps.Log.Error("preferences: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not load your preferences just now, please try again")
		return store.Subscriber{}, false
	}
	return sub, true
}

// preferencesPost reads a POST from the preference centre (its form with
// the want fields, the token in it) and loads the subscriber the token
// names (who), answering the page itself when it cannot (ok false). The token
// travels in the body, which another site's page could post too: only our
// own page may.
func (s *Server) preferencesPost(w http.ResponseWriter, r *http.Request, want fields) (in input, tok string, who token.Subject, sub store.Subscriber, ok bool) {
	if in, ok = s.readForm(w, r, want); !ok {
		return
	}
	tok = in.get("token")
	who, ok = s.preferencesToken(w, tok)
	if !ok {
		return
	}
	if !s.ownPage(r) {
		fail(w, r, http.StatusForbidden, "cross-site request refused: use the link in any of our mails")
		return in, tok, who, sub, false
	}
	sub, ok = s.preferencesOf(w, r, who)
	return in, tok, who, sub, ok
}

// preferencesPage handles GET /preferences?token=.
func (s *Server) preferencesPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	who, ok := s.preferencesToken(w, tok)
	if !ok {
		return
	}
	sub, ok := s.preferencesOf(w, r, who)
	if !ok {
		return
	}
	if sub.Status != store.Active {
		// Nothing to choose any more, but their data is still here.
		renderPage(w, http.StatusOK, "message", pageData{Title: "You are not subscribed", Token: tok, DataRequests: true,
			Lines: []string{"We send nothing to " + sub.Email + ". To get our mail again, subscribe on the front page."}})
		return
	}
	saved := ""
	if r.URL.Query().Get("saved") == "1" {
		saved = "Saved."
	}
	s.renderPreferences(w, r, http.StatusOK, tok, sub, saved)
}

func (s *Server) renderPreferences(w http.ResponseWriter, r *http.Request, code int, tok string, sub store.Subscriber, saved string, errs ...string) {
	// The address masked: the link may have been forwarded.
	d := pageData{Title: "Your preferences", Email: address.Masked(sub.Email), Token: tok, Topics: s.topicChoices(sub.Topics),
		Name: sub.Name, Timezone: sub.Timezone, Push: s.offerPush(tok)}
	chans, sms, note, phone, err := s.channelsOffer(r.Context(), sub)
	if err == nil && s.smsOn() {
		d.SMS, err = s.smsOffer(r.Context(), sub, phone)
	}
	if err != nil {
		s.deps.Log.Error("preferences: read the channels", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not show your preferences just now, please try again")
		return
	}
	d.Topics, d.ChannelsNote = s.withChannels(d.Topics, chans, sms), note
	if saved != "" {
		d.Lines = []string{saved}
	}
	if len(errs) > 0 {
		d.Error = errs[0]
	}
	renderPage(w, code, "preferences", d)
}

// ended is the page for an address whose subscription is over (email ""
// for a link whose subscriber is no longer on the list).
func (s *Server) ended(w http.ResponseWriter, email string) {
	whom := "you"
	if email != "" {
		whom = email
	}
	message(w, http.StatusOK, "You are not subscribed",
		"We send nothing to "+whom+". To get our mail again, subscribe on the front page.")
}

// preferences handles POST /preferences: save the topics, name and time
// zone, or leave everything (leave=all). Unticking every topic is leaving
// too.
func (s *Server) preferences(w http.ResponseWriter, r *http.Request) {
	in, tok, who, before, ok := s.preferencesPost(w, r, preferencesFields)
	if !ok {
		return
	}
	email := before.Email
	ctx := r.Context()
	// A preference centre opened from an issue's mail (who.Issue) counts
	// a subscription ended here in that issue's report.
	if in.get("leave") == "all" {
		if err := s.endFrom(r.Context(), email, who.Issue); err != nil {
			s.deps.Log.Error("preferences: leave", "err", err)
			fail(w, r, http.StatusServiceUnavailable, "we could not unsubscribe you just now, please try again")
			return
		}
		s.left(w, r, before)
		return
	}
	if before.Status != store.Active {
		s.ended(w, email)
		return
	}
	name, tz, err := profile(in)
	var chosen []string
	if err == nil {
		chosen, err = s.cfg.Topics.Current().Check(in["topics"])
	}
	if err == nil {
		err = s.noNewAssigned(chosen, before.Topics)
	}
	var channels map[string][]string
	if err == nil && in.get("channels_shown") == "1" {
		channels, err = s.chosenChannels(in["channels"])
	}
	if err != nil {
		// Show the page again as it was, with what is wrong.
		s.renderPreferences(w, r, http.StatusBadRequest, tok, before, "", err.Error())
		return
	}
	// A retired topic is not on the page, and who had it keeps it: it is
	// not taken away by a save of the others (leaving everything still
	// leaves it too).
	if len(chosen) > 0 {
		for _, id := range before.Topics {
			if t, ok := s.cfg.Topics.Current().Topic(id); ok && t.Retired && !slices.Contains(chosen, id) {
				chosen = append(chosen, id)
			}
		}
	}
	sub, err := s.setPreferences(ctx, before, store.Preferences{Topics: chosen, Name: name, Timezone: tz, FromIssue: who.Issue})
	if errors.Is(err, store.ErrNotActive) || errors.Is(err, store.ErrNotFound) {
		s.ended(w, email)
		return
	}
	if err != nil {
		s.deps.Log.Error("preferences: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not save your preferences just now, please try again")
		return
	}
	if sub.Status != store.Active {
		s.left(w, r, before)
		return
	}
	if channels != nil {
		if err := s.saveChannels(ctx, sub, channels); err != nil {
			s.deps.Log.Error("preferences: store the channels", "err", err)
			fail(w, r, http.StatusServiceUnavailable, "we could not save your preferences just now, please try again")
			return
		}
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusOK, viewOf(sub))
		return
	}
	// Post/Redirect/Get: the page saved is at its link again, so a
	// reload or a bookmark opens it (rather than a URL without the token).
	http.Redirect(w, r, "/preferences?token="+url.QueryEscape(tok)+"&saved=1", http.StatusSeeOther)
}

// noNewAssigned refuses a topic the newsletter assigns (not public)
// that the person does not have: the page does not offer it, and only
// the API, the console or an import give it.
func (s *Server) noNewAssigned(chosen, had []string) error {
	for _, id := range chosen {
		if t, _ := s.cfg.Topics.Current().Topic(id); t.Assigned && !slices.Contains(had, id) {
			return fmt.Errorf("topic %q is %w: it is given by the newsletter, not chosen here", id, topics.ErrNotPublic)
		}
	}
	return nil
}

// left answers a person who left everything (before: as they were),
// with the button that undoes it.
func (s *Server) left(w http.ResponseWriter, r *http.Request, before store.Subscriber) {
	if wantsJSON(r) {
		webjson.Write(w, http.StatusOK, map[string]string{"email": before.Email, "status": string(store.Unsubscribed)})
		return
	}
	renderPage(w, http.StatusOK, "message", pageData{Title: "You are unsubscribed", Undo: s.undoToken(before, leaving(before, "")),
		Lines: []string{"We will not send any more mail to " + before.Email + "."}})
}

// setPreferences stores p for before and does what the change calls for
// (subscribers.Service.SetPreferences: the console's topics change is
// the same).
func (s *Server) setPreferences(ctx context.Context, before store.Subscriber, p store.Preferences) (store.Subscriber, error) {
	return s.subs.SetPreferences(ctx, before, p)
}
