package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

type pinger struct{ err error }

func (p pinger) Ping(context.Context) error { return p.err }

func TestProbes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{{nil, http.StatusOK}, {errors.New("connection refused"), http.StatusServiceUnavailable}} {
		mux := http.NewServeMux()
		Register(mux, pinger{c.err})
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != c.want {
			t.Errorf("readyz with ping error %v: %d, want %d", c.err, rec.Code, c.want)
		}
		rec = httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("healthz: %d", rec.Code)
		}
	}
}
