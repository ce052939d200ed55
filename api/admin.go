package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/store"
)

type subscriberView struct {
	Email          string       `json:"email"`
	Name           string       `json:"name,omitempty"`
	Status         store.Status `json:"status"`
	Timezone       string       `json:"timezone"`
	CreatedAt      time.Time    `json:"created_at"`
	ConfirmedAt    *time.Time   `json:"confirmed_at"`
	UnsubscribedAt *time.Time   `json:"unsubscribed_at"`
	Topics         []string     `json:"topics"`
	// Tags and Fields: the person's tags and custom field values (left
	// out when they have none).
	Tags   []string          `json:"tags,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// getSubscriber handles GET /api/subscribers/{email}.
func (s *Server) getSubscriber(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	sub, err := s.deps.Store.Get(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	}
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	webjson.Write(w, http.StatusOK, viewOf(sub))
}

func viewOf(sub store.Subscriber) subscriberView {
	return subscriberView{
		Email: sub.Email, Name: sub.Name, Status: sub.Status, Timezone: sub.Timezone, CreatedAt: sub.CreatedAt,
		ConfirmedAt: timePtr(sub.ConfirmedAt), UnsubscribedAt: timePtr(sub.UnsubscribedAt), Topics: sub.Topics,
		Tags: sub.Tags, Fields: sub.Fields,
	}
}
