package form

import (
	"errors"
	"io"
	"net/http"

	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/services/media"
)

// ErrNoImage is an upload without a file chosen.
var ErrNoImage = errors.New("choose an image file to upload")

// IssueImage is the editor's form posted with an image to upload
// (multipart): the issue's fields as NewIssue reads them, the image (at
// most media.MaxBytes: one byte more tells the service it is too
// large) and its alt text.
type IssueImage struct {
	Issue Issue
	Image []byte
	Alt   string
}

// NewIssueImage reads the editor's form with its image field.
func NewIssueImage(w http.ResponseWriter, r *http.Request) (IssueImage, error) {
	if err := httpbody.Limit(w, r, MaxIssueForm+media.MaxBytes+64<<10); err != nil {
		return IssueImage{}, ErrTooLarge
	}
	done, err := httpbody.ParseMultipartForm(r, 1<<20)
	defer done() // the image is read into memory before this returns
	if err != nil {
		if httpbody.IsTooLarge(err) {
			return IssueImage{}, ErrTooLarge
		}
		return IssueImage{}, errors.New("the form could not be read")
	}
	out := IssueImage{Issue: issueOf(r), Alt: value(r, "image_alt")}
	file, _, err := r.FormFile("image")
	if err != nil {
		return out, ErrNoImage
	}
	defer func() { _ = file.Close() }() // read-only
	if out.Image, err = io.ReadAll(io.LimitReader(file, media.MaxBytes+1)); err != nil {
		return out, errors.New("the image could not be read")
	}
	return out, nil
}
