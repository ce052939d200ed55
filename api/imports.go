package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/services/csvimport"
)

// ImportStatuses reads the console's imports (*csvimport.Jobs).
type ImportStatuses interface {
	Status(ctx context.Context, id string) (csvimport.Status, error)
}

func (s *Server) importRoutes() {
	if s.deps.Imports == nil {
		return
	}
	s.mux.Handle("GET /api/imports/{id}", s.Admin(http.HandlerFunc(s.getImport)))
}

// getImport handles GET /api/imports/{id}: where an import uploaded
// through the console stands, as its page shows it; 404 unknown or
// expired; 503 Redis away.
func (s *Server) getImport(w http.ResponseWriter, r *http.Request) {
	st, err := s.deps.Imports.Status(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, csvimport.ErrNoJob):
		webjson.Write(w, http.StatusNotFound, errorBody("no such import"))
	case err != nil:
		s.deps.Log.Error("read an import", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the store is unavailable; try again"))
	default:
		webjson.Write(w, http.StatusOK, st)
	}
}
