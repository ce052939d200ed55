package media

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dir stores images as files of one folder, served back by the API's
// GET /media/{name} at Base + "/media/" + name.
type Dir struct {
	Path string
	// Base is the service's public origin (NEWSLETTER_BASE_URL).
	Base string
}

// Put implements Store: written to a temporary file and renamed, so a
// reader never sees half an image; a name already there is kept (the
// same name is the same content).
func (d *Dir) Put(_ context.Context, name, _ string, data []byte) error {
	if !ValidName(name) {
		return fmt.Errorf("media: bad name %q", name)
	}
	final := filepath.Join(d.Path, name)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.Path, ".upload-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name()) // a partial file: its own error is the one to report
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		_ = os.Remove(tmp.Name()) // as above
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// URL implements Store.
func (d *Dir) URL(name string) string { return strings.TrimRight(d.Base, "/") + "/media/" + name }

// Open is the stored file of name (os.ErrNotExist for a name not
// stored or not one Upload makes).
func (d *Dir) Open(name string) (*os.File, error) {
	if !ValidName(name) {
		return nil, os.ErrNotExist
	}
	return os.Open(filepath.Join(d.Path, name))
}
