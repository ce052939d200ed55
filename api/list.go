package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/store"
)

// Owning the list: adding a person by hand, changing one, bulk actions on
// a selection and the CSV export (docs/publishing.md). The work is
// subscribers.Service's, which the console calls too, so a change is the
// same from both; here are the routes that read the JSON and answer it.

// The audit actions of the list.
const (
	AuditSubscriberAdded = subscribers.AuditSubscriberAdded
)

// maxListBody is the largest body the list's routes read.
const (
	maxListBody = 256 << 10
)

func bad(format string, a ...any) error {
	return &subscribers.ListError{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, a...)}
}

func (s *Server) listRoutes() {
	m := s.mux
	m.Handle("POST /api/subscribers", s.Admin(http.HandlerFunc(s.addSubscriber)))
	m.Handle("PATCH /api/subscribers/{email}", s.Admin(http.HandlerFunc(s.patchSubscriber)))
	m.Handle("POST /api/subscribers/bulk", s.Admin(http.HandlerFunc(s.bulkSubscribers)))
	m.Handle("GET /api/bulk/{id}", s.Admin(http.HandlerFunc(s.bulkStatus)))
	m.Handle("POST /api/exports", s.Admin(http.HandlerFunc(s.createExport)))
	m.Handle("GET /api/exports/{id}", s.Admin(http.HandlerFunc(s.getExport)))
}

// readListBody decodes a JSON body into v: unknown fields refused, so a
// misspelt field is an error, not a silent no-op.
func readListBody(w http.ResponseWriter, r *http.Request, v any) error {
	return readJSONBody(w, r, maxListBody, v)
}

// readJSONBody decodes a JSON body of at most max bytes into v: unknown
// fields refused. The error is a *ListError (answerListError).
func readJSONBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	err := httpbody.Limit(w, r, max)
	if err == nil {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil && dec.More() {
			err = errors.New("one JSON object expected")
		}
	}
	switch {
	case httpbody.IsTooLarge(err):
		return &subscribers.ListError{Code: http.StatusRequestEntityTooLarge, Msg: "request body too large"}
	case errors.Is(err, io.EOF):
		return bad("a JSON body is required")
	case err != nil:
		return bad("unreadable body: %v", err)
	}
	return nil
}

// addSubscriber handles POST /api/subscribers.
func (s *Server) addSubscriber(w http.ResponseWriter, r *http.Request) {
	var in subscribers.AddInput
	if err := readListBody(w, r, &in); err != nil {
		s.answerListError(w, "add a subscriber", err)
		return
	}
	sub, err := s.AddSubscriber(r.Context(), in)
	if err != nil {
		s.answerListError(w, "add a subscriber", err)
		return
	}
	webjson.Write(w, http.StatusCreated, listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)})
}

// patchSubscriber handles PATCH /api/subscribers/{email}.
func (s *Server) patchSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	var in subscribers.ChangeInput
	if err := readListBody(w, r, &in); err != nil {
		s.answerListError(w, "change a subscriber", err)
		return
	}
	sub, err := s.ChangeSubscriber(r.Context(), email, in)
	if err != nil {
		s.answerListError(w, "change a subscriber", err)
		return
	}
	webjson.Write(w, http.StatusOK, listedSubscriber{ID: sub.ID, subscriberView: viewOf(sub)})
}

// answerListError answers err: a ListError as it says, a store failure
// as 503 (subscribers.Service.AnswerError, the one answer of the list's
// errors).
func (s *Server) answerListError(w http.ResponseWriter, what string, err error) {
	s.subs.AnswerError(w, what, err)
}

// AddSubscriber adds a person by hand (subscribers.Service.AddSubscriber;
// kept on the Server for its callers that hold it).
func (s *Server) AddSubscriber(ctx context.Context, in subscribers.AddInput) (store.Subscriber, error) {
	return s.subs.AddSubscriber(ctx, in)
}

// ChangeSubscriber changes a person by hand
// (subscribers.Service.ChangeSubscriber).
func (s *Server) ChangeSubscriber(ctx context.Context, email string, in subscribers.ChangeInput) (store.Subscriber, error) {
	return s.subs.ChangeSubscriber(ctx, email, in)
}
