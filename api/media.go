package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/media"
)

// mediaRoutes are the image uploads (editor) and, when the images are
// kept in a local folder, the public route that serves them back (a
// bucket serves its own).
func (s *Server) mediaRoutes() {
	if s.deps.Media == nil {
		return
	}
	s.mux.Handle("POST /api/media", s.Editor(http.HandlerFunc(s.uploadMedia)))
	if dir := s.deps.Media.Local(); dir != nil {
		s.mux.HandleFunc("GET /media/{name}", serveMedia(dir))
	}
}

// uploadMedia handles POST /api/media: an image as the raw body or as a
// multipart form's "file" (alt text: ?alt= or the form's "alt"), at most
// media.MaxBytes, taken only when its content is a PNG, JPEG, GIF or
// WebP image: 201 with its name, URL and Markdown. 400 empty, 413 too
// large, 415 not an image, 503 when media.MaxInFlight are being stored;
// nothing stored then.
func (s *Server) uploadMedia(w http.ResponseWriter, r *http.Request) {
	data, alt, err := readUpload(w, r)
	var m media.Media
	if err == nil {
		m, err = s.deps.Media.Upload(r.Context(), data, alt)
	}
	switch {
	case errors.Is(err, media.ErrEmpty), errors.Is(err, errBadUpload):
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
	case errors.Is(err, media.ErrTooLarge):
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody(err.Error()))
	case errors.Is(err, media.ErrTooManyPixels):
		webjson.Write(w, http.StatusUnprocessableEntity, errorBody(err.Error()))
	case errors.Is(err, media.ErrNotImage):
		webjson.Write(w, http.StatusUnsupportedMediaType, errorBody(err.Error()))
	case errors.Is(err, media.ErrBusy):
		w.Header().Set("Retry-After", "1")
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	case err != nil:
		s.deps.Log.Error("media: upload not stored", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the image"))
	default:
		s.note(r, audit.MediaUploaded, "media:"+m.Name, m.ContentType)
		webjson.Write(w, http.StatusCreated, m)
	}
}

var errBadUpload = errors.New("the upload could not be read: send the image as the body, or as the multipart field \"file\"")

// readUpload reads an upload's image and alt text, within media.MaxBytes
// (and a little for a form's framing).
func readUpload(w http.ResponseWriter, r *http.Request) ([]byte, string, error) {
	if err := httpbody.Limit(w, r, media.MaxBytes+64<<10); err != nil {
		return nil, "", media.ErrTooLarge
	}
	body, alt := io.Reader(r.Body), r.URL.Query().Get("alt")
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		done, err := httpbody.ParseMultipartForm(r, 1<<20)
		defer done()
		if err != nil {
			if httpbody.IsTooLarge(err) {
				return nil, "", media.ErrTooLarge
			}
			return nil, "", errBadUpload
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			return nil, "", errBadUpload
		}
		defer func() { _ = f.Close() }() // read-only
		body, alt = f, r.FormValue("alt")
	}
	data, err := io.ReadAll(io.LimitReader(body, media.MaxBytes+1))
	if httpbody.IsTooLarge(err) {
		return nil, "", media.ErrTooLarge
	}
	if err != nil {
		return nil, "", errBadUpload
	}
	return data, alt, nil
}

// serveMedia handles GET /media/{name}: a stored image, public (mails
// link it), with the type its name says (the one sniffed at upload),
// nosniff, a CSP that runs nothing, and a year's cache (the name is the
// content's hash). 404 for any name Upload does not make.
func serveMedia(dir *media.Dir) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		f, err := dir.Open(name)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				http.Error(w, "the image could not be read", http.StatusServiceUnavailable)
				return
			}
			http.NotFound(w, r)
			return
		}
		defer func() { _ = f.Close() }() // read-only
		st, err := f.Stat()
		if err != nil {
			http.Error(w, "the image could not be read", http.StatusServiceUnavailable)
			return
		}
		h := w.Header()
		h.Set("Content-Type", media.ContentType(name))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		h.Set("Cache-Control", media.CacheControl)
		h.Set("ETag", `"`+strings.TrimSuffix(name, name[strings.LastIndexByte(name, '.'):])+`"`)
		http.ServeContent(w, r, "", st.ModTime(), f)
	}
}
