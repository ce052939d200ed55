package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The Idempotency-Key of POST /api/events (issue #45): a client that
// retries an event (a timeout, a 503) sends the same key, and the retry
// answers the first event instead of queueing another. The store keeps
// the key (store/eventkeys.go says how a pending key is held and taken
// over); this file reads the header and answers.

// idempotencyKeyHeader names the header, as Stripe's and the IETF draft's.
const idempotencyKeyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds a key, in characters (printable ASCII, so
// bytes): room for a UUID or a client's own request id, not a body.
const maxIdempotencyKey = 255

// idempotencyReplayedHeader marks an answer given again for a key.
const idempotencyReplayedHeader = "Idempotent-Replayed"

// idempotencyKey reads the request's Idempotency-Key: "" when there is
// none; a message says what is wrong with one.
func idempotencyKey(h http.Header) (string, string) {
	vals, ok := h[http.CanonicalHeaderKey(idempotencyKeyHeader)]
	switch {
	case !ok:
		return "", ""
	case len(vals) != 1:
		return "", idempotencyKeyHeader + ": give it once"
	}
	key := vals[0]
	if key == "" || len(key) > maxIdempotencyKey {
		return "", fmt.Sprintf("%s: 1 to %d printable ASCII characters, %d given", idempotencyKeyHeader, maxIdempotencyKey, len(key))
	}
	for i := range len(key) {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return "", fmt.Sprintf("%s: printable ASCII only (byte %d is 0x%02x)", idempotencyKeyHeader, i+1, c)
		}
	}
	return key, ""
}

// inputSum is a keyed hash of a body's fields, the same for the same
// fields in any order or spacing, JSON or form: what a key is bound to.
// Keyed, because the fields may hold an address, and the key's record
// must say nothing of it to whoever reads Redis after an erasure.
func (s *Server) inputSum(in input) string {
	b, _ := json.Marshal(in) // a map of lists of strings always marshals, its keys sorted
	return s.deps.Signer.Fingerprint(b)
}

// queueEventOnce is queueEvent under an Idempotency-Key: the key's first
// answer again (202, as it was), 422 when the key came with another body,
// 409 while another request with the key is under way, or the event
// queued and its answer kept. A failure (503) lets the key go, so the
// retry goes ahead.
func (s *Server) queueEventOnce(w http.ResponseWriter, r *http.Request, key string, in input, ev checkedEvent) {
	who, _ := adminauth.FromContext(r.Context()) // the guard put it there
	k := store.EventKey{Scope: who.Name, Key: key, Sum: s.inputSum(in), Owner: rand.Text(), EventID: tasks.NewEventID()}
	got, err := s.deps.Store.ReserveEventKey(r.Context(), k)
	if err != nil {
		s.deps.Log.Error("event: reserve the idempotency key", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not queue the event, please retry"))
		return
	}
	switch got.Outcome {
	case store.KeyOtherRequest:
		webjson.Write(w, http.StatusUnprocessableEntity, errorBody(idempotencyKeyHeader+": this key was used with another request (another body); use a new key for a new event"))
		return
	case store.KeyBusy:
		w.Header().Set("Retry-After", "1")
		webjson.Write(w, http.StatusConflict, errorBody(idempotencyKeyHeader+": a request with this key is in progress; retry"))
		return
	case store.KeyAnswered:
		var answer map[string]string
		if err := json.Unmarshal(got.Answer, &answer); err != nil {
			s.deps.Log.Error("event: the idempotency key's stored answer", "err", err)
			webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not read the first answer to this key"))
			return
		}
		if ev.p.Topic == "" {
			// The record keeps no address (an erasure must leave none
			// behind): the same fields, so the same address, came again.
			answer["email"] = ev.email
		}
		w.Header().Set(idempotencyReplayedHeader, "true")
		webjson.Write(w, got.Code, answer)
		return
	}
	ev.p.ID = got.EventID
	code, answer := s.queueEvent(r, ev)
	// The answer is the client's whatever the key's write does: a key
	// neither finished nor let go lapses with its lease, and its retry
	// queues the same event id (a conflict if it was queued).
	ctx := context.WithoutCancel(r.Context())
	if code == http.StatusAccepted {
		kept := maps.Clone(answer)
		delete(kept, "email")      // put back from the retry's own fields
		b, _ := json.Marshal(kept) // a map of strings always marshals
		if mine, err := s.deps.Store.FinishEventKey(ctx, k, code, b); err != nil || !mine {
			s.deps.Log.Warn("event: keep the idempotency key's answer", "err", err, "held", mine)
		}
	} else if err := s.deps.Store.ReleaseEventKey(ctx, k); err != nil {
		s.deps.Log.Warn("event: let the idempotency key go", "err", err)
	}
	webjson.Write(w, code, answer)
}
