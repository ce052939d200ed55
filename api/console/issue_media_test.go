package console_test

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// postImage posts the editor's fields and an image as the Upload
// button does (multipart).
func (b *browser) postImage(path string, fields map[string]string, image []byte) page {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if image != nil {
		fw, _ := mw.CreateFormFile("image", "photo.png")
		_, _ = fw.Write(image)
	}
	_ = mw.Close()
	req, _ := http.NewRequest("POST", b.e.srv.URL+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.e.srv.URL)
	return b.do(req)
}

// TestConsoleImageUpload: the editor offers an image upload; posting it
// with the typed text stores the image and gives the editor back with
// the text as typed plus the image's Markdown, not saved; text posted
// as an image is refused with the typed text kept and nothing saved.
func TestConsoleImageUpload(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	is, err := e.st.CreateIssue(t.Context(), store.IssueContent{Subject: "Birds", Body: "saved text", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/admin/issues/%d", is.ID)
	mustContain(t, "the editor", b.get(path), `formaction="`+path+`/media"`, `formenctype="multipart/form-data"`, `name="image" type="file"`)
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{"subject": "Birds", "body": "typed, not saved", "topics": "digest", "version": "1", "image_alt": "A robin"}
	p := b.postImage(path+"/media", fields, img.Bytes())
	md := regexp.MustCompile(`!\[A robin\]\(http://newsletter\.test/media/[0-9a-f]{64}\.png\)`).FindString(p.body)
	if p.code != 200 || md == "" || !strings.Contains(p.body, "typed, not saved\n\n"+md) || !strings.Contains(p.body, `data-field="uploaded"`) {
		t.Fatalf("upload: %d %s", p.code, p.body)
	}
	p = b.postImage(path+"/media", fields, []byte("<svg onload=alert(1)>"))
	if p.code != http.StatusUnsupportedMediaType || !strings.Contains(p.body, "not an image") || !strings.Contains(p.body, "typed, not saved") {
		t.Fatalf("text as an image: %d", p.code)
	}
	if p := b.postImage(path+"/media", fields, nil); p.code != http.StatusBadRequest || !strings.Contains(p.body, "choose an image file") {
		t.Fatalf("no file: %d", p.code)
	}
	if got, _ := e.st.Issue(t.Context(), is.ID); got.Body != "saved text" || got.Version != 1 {
		t.Fatalf("an upload saved the issue: %+v", got)
	}
}
