package api

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/services/media"
)

func testPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 3))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestMediaUploadAndServe: an image posted raw or as a form is stored
// once under its hash and served back public with its sniffed type,
// nosniff, a CSP and a year's cache; an empty body, text dressed as a
// PNG, a body over 5 MiB and an unknown name are refused with nothing
// stored.
func TestMediaUploadAndServe(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		d.Media = media.New(&media.Dir{Path: dir, Base: "https://news.example.com"})
	})
	post := func(body io.Reader, contentType, query string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/media"+query, body)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }() // read-only
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	img := testPNG(t)
	code, out := post(bytes.NewReader(img), "image/jpeg", "?alt=A+grey+square")
	var m media.Media
	if code != http.StatusCreated || json.Unmarshal([]byte(out), &m) != nil || !strings.HasSuffix(m.Name, ".png") ||
		m.URL != "https://news.example.com/media/"+m.Name || m.Markdown != "![A grey square]("+m.URL+")" {
		t.Fatalf("raw upload (its type judged by content, not the header): %d %s", code, out)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "square.gif")
	_, _ = fw.Write(img)
	_ = mw.WriteField("alt", "Square")
	_ = mw.Close()
	if code, out := post(&form, mw.FormDataContentType(), ""); code != http.StatusCreated || !strings.Contains(out, `"name":"`+m.Name+`"`) || !strings.Contains(out, "![Square]") {
		t.Fatalf("multipart upload: %d %s", code, out)
	}

	resp, err := http.Get(e.srv.URL + "/media/" + m.Name)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read-only
	h := resp.Header
	if resp.StatusCode != 200 || !bytes.Equal(got, img) || h.Get("Content-Type") != "image/png" || h.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(h.Get("Cache-Control"), "max-age=31536000") || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /media: %d %v", resp.StatusCode, h)
	}

	for name, c := range map[string]struct {
		body, ct string
		code     int
	}{
		"empty":     {"", "image/png", http.StatusBadRequest},
		"text":      {"<svg onload=alert(1)>", "image/png", http.StatusUnsupportedMediaType},
		"too large": {string(img) + strings.Repeat("x", media.MaxBytes), "image/png", http.StatusRequestEntityTooLarge},
		"bad form":  {"--x\r\n", "multipart/form-data; boundary=x", http.StatusBadRequest},
	} {
		if code, out := post(strings.NewReader(c.body), c.ct, ""); code != c.code || !strings.Contains(out, `"error"`) {
			t.Errorf("%s: %d %s, want %d", name, code, out, c.code)
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("the folder holds %d files, want the one image", len(files))
	}
	for _, path := range []string{"/media/" + strings.Repeat("0", 64) + ".png", "/media/..%2Fsecret", "/media/" + strings.TrimSuffix(m.Name, ".png") + ".svg"} {
		if resp, err := http.Get(e.srv.URL + path); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: %v %v", path, resp.StatusCode, err)
		} else {
			_ = resp.Body.Close() // read-only
		}
	}
}

// TestMediaUploadLeavesNoTempFiles: a multipart upload whose part is
// over the 1 MiB kept in memory is written to a temporary file, which is
// gone after the answer, whatever the answer (the probe found each such
// upload left its file in /tmp for good: net/http removes them only for
// the request it handed over, not for the copy the request timeout makes).
func TestMediaUploadLeavesNoTempFiles(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		d.Media = media.New(&media.Dir{Path: t.TempDir(), Base: "https://news.example.com"})
	})
	for _, size := range []int{3 << 19, media.MaxBytes + 100} { // 1.5 MiB (415: not an image), just over the cap (413)
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		fw, _ := mw.CreateFormFile("file", "big.png")
		_, _ = fw.Write(bytes.Repeat([]byte("x"), size))
		_ = mw.Close()
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/media", &form)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close() // only the status matters
		if resp.StatusCode < 400 {
			t.Fatalf("%d bytes of x: %d, want a refusal", size, resp.StatusCode)
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			t.Fatalf("after a %d-byte multipart upload answered %d, the temporary folder holds %d file(s)", size, resp.StatusCode, len(left))
		}
	}
}
