package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// A person's app installs for mobile push (FCM, APNs): the product
// backend, which knows them, registers and removes them (editor).

var deviceFields = fields{"platform": textField, "token": textField}

func (s *Server) deviceRoutes() {
	s.mux.Handle("POST /api/subscribers/{email}/devices", s.Editor(http.HandlerFunc(s.addDevice)))
	s.mux.Handle("GET /api/subscribers/{email}/devices", s.Editor(http.HandlerFunc(s.listDevices)))
	s.mux.Handle("DELETE /api/subscribers/{email}/devices/{id}", s.Editor(http.HandlerFunc(s.deleteDevice)))
}

// deviceView is a device as the API shows it: its token's end only (a
// token is a credential to notify the person's phone).
type deviceView struct {
	ID        string    `json:"id"`
	Platform  string    `json:"platform"`
	TokenEnd  string    `json:"token_end"`
	CreatedAt time.Time `json:"created_at"`
}

func deviceViewOf(d store.Device) deviceView {
	return deviceView{ID: d.ID, Platform: d.Platform, TokenEnd: d.Token[max(0, len(d.Token)-6):], CreatedAt: d.CreatedAt}
}

// addDevice handles POST /api/subscribers/{email}/devices
// {"platform":"fcm"|"apns","token":…}: 201 with the device. An unknown
// platform or a token of the wrong shape: 400; a person not active: 409;
// nothing is stored.
func (s *Server) addDevice(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, deviceFields, false)
	if in == nil {
		return
	}
	platform, tok := strings.TrimSpace(in.get("platform")), strings.TrimSpace(in.get("token"))
	if err := s.checkDevice(platform, tok); err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	sub, ok := s.activeSubscriber(w, r, email)
	if !ok {
		return
	}
	d, err := s.deps.Store.AddDevice(r.Context(), sub.ID, store.Device{Platform: platform, Token: tok})
	switch {
	case errors.Is(err, store.ErrNotActive):
		webjson.Write(w, http.StatusConflict, errorBody(email+" is not an active subscriber"))
		return
	case errors.Is(err, store.ErrNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return
	case err != nil:
		s.deps.Log.Error("devices: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the device, please retry"))
		return
	}
	s.noteSubscriber(r, audit.DeviceAdded, email, d.Platform+" "+d.ID)
	webjson.Write(w, http.StatusCreated, deviceViewOf(d))
}

// listDevices handles GET /api/subscribers/{email}/devices.
func (s *Server) listDevices(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	sub, ok := s.subscriber(w, r, email)
	if !ok {
		return
	}
	all, err := s.deps.Store.DevicesOf(r.Context(), []int64{sub.ID})
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	out := make([]deviceView, 0, len(all[0]))
	for _, d := range all[0] {
		out = append(out, deviceViewOf(d))
	}
	webjson.Write(w, http.StatusOK, map[string]any{"devices": out})
}

// deleteDevice handles DELETE /api/subscribers/{email}/devices/{id}: 204,
// or 404 when the person has no such device.
func (s *Server) deleteDevice(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	sub, ok := s.subscriber(w, r, email)
	if !ok {
		return
	}
	id := r.PathValue("id")
	err := s.deps.Store.DeleteDevice(r.Context(), sub.ID, id)
	switch {
	case errors.Is(err, store.ErrNoDevice):
		webjson.Write(w, http.StatusNotFound, errorBody("no device "+id+" of "+email))
		return
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	s.noteSubscriber(r, audit.DeviceRemoved, email, id)
	w.WriteHeader(http.StatusNoContent)
}

// subscriber is the person with address email, or an answer written: 404
// when there is none, 503 when the store cannot say.
func (s *Server) subscriber(w http.ResponseWriter, r *http.Request, email string) (store.Subscriber, bool) {
	sub, err := s.deps.Store.Get(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
		return sub, false
	}
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return sub, false
	}
	return sub, true
}

// activeSubscriber is subscriber, and 409 when the person is not active.
func (s *Server) activeSubscriber(w http.ResponseWriter, r *http.Request, email string) (store.Subscriber, bool) {
	sub, ok := s.subscriber(w, r, email)
	if ok && sub.Status != store.Active {
		webjson.Write(w, http.StatusConflict, errorBody(email+" is not an active subscriber"))
		return sub, false
	}
	return sub, ok
}
