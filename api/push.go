package api

import (
	"bytes"
	"embed"
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// Web push: a person who opened the preference centre (or just confirmed)
// can have this browser notified too. The page's script (/push.js)
// registers the service worker (/sw.js), subscribes with the VAPID public
// key and posts the subscription here with the preferences token. Without
// NEWSLETTER_VAPID_* none of these routes exist and the pages offer
// nothing.

//go:embed static/sw.js static/push.js
var staticFiles embed.FS

// startTime stands for the scripts' modification time: they change only
// with the binary.
var startTime = time.Now()

// pushOffer is what the "Also notify this browser" block needs.
type pushOffer struct {
	Key   string // the VAPID public key, base64url
	Token string // a preferences token of the person
}

// pushOn tells whether web push is configured.
func (s *Server) pushOn() bool { return s.cfg.VAPIDPublicKey != "" }

// offerPush is the block for a page shown to the person with address
// email, or nil when web push is off.
func (s *Server) offerPush(tok string) *pushOffer {
	if !s.pushOn() || tok == "" {
		return nil
	}
	return &pushOffer{Key: s.cfg.VAPIDPublicKey, Token: tok}
}

func (s *Server) pushRoutes() {
	if !s.pushOn() {
		return
	}
	s.mux.HandleFunc("POST /preferences/push", s.pushSubscribe)
	s.mux.HandleFunc("GET /sw.js", serveScript("static/sw.js", true))
	s.mux.HandleFunc("GET /push.js", serveScript("static/push.js", false))
}

// namesAPage tells whether r says which page it comes from.
func namesAPage(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != "" || r.Header.Get("Referer") != ""
}

// serveScript serves an embedded script. The service worker is fetched
// again by browsers to look for updates, so it is never cached for long,
// and it may control the whole origin.
func serveScript(name string, worker bool) http.HandlerFunc {
	body, err := staticFiles.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: missing is a build error
	}
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		if worker {
			h.Set("Service-Worker-Allowed", "/")
		}
		http.ServeContent(w, r, name, startTime, bytes.NewReader(body))
	}
}

// pushSubscribe handles POST /preferences/push: form fields token and
// subscription (the PushSubscription's JSON), or a JSON body with the two
// (subscription an object, or its JSON as a string; pushFields). 201 once stored; a
// malformed subscription, keys of the wrong size, an endpoint that is not
// https or not public: 400 and nothing stored.
func (s *Server) pushSubscribe(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readForm(w, r, pushFields)
	if !ok {
		return
	}
	who, err := s.deps.Signer.Verify(token.Preferences, in.get("token"))
	if err != nil {
		fail(w, r, http.StatusBadRequest, "this link is not valid: copy the whole link from the foot of one of our mails")
		return
	}
	// The token travels in the body, as on the preference form: only our
	// own page may post it. Only our script in a browser posts here, and
	// a browser always names the page (Sec-Fetch-Site, Origin) on a
	// POST from a script, so a request naming none is no page of ours,
	// JSON or not (ownPage lets JSON without them through, for programs
	// on the other token routes).
	if !namesAPage(r) || !s.ownPage(r) {
		fail(w, r, http.StatusForbidden, "cross-site request refused: use the link in any of our mails")
		return
	}
	sub, err := s.deps.Checks.PushSubscription([]byte(in.get("subscription")))
	if err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	if _, err := s.cfg.Endpoints.CheckURL(ctx, sub.Endpoint); err != nil {
		fail(w, r, http.StatusBadRequest, "push endpoint refused: "+err.Error())
		return
	}
	person, err := s.subscriberOf(ctx, who)
	if err == nil {
		err = s.deps.Store.AddPushSubscription(ctx, person.ID, sub)
	}
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNotActive):
		fail(w, r, http.StatusConflict, "we send nothing to this subscription: subscribe first")
		return
	case err != nil:
		s.deps.Log.Error("push subscription: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not turn notifications on just now, please try again")
		return
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusCreated, map[string]string{"status": "subscribed", "endpoint": sub.Endpoint})
		return
	}
	message(w, http.StatusCreated, "Notifications on", "This browser will show a notification when something new comes out.")
}
