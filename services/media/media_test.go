package media_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/newsletter/newsletter/services/media"
)

// PNG is a small PNG image.
func PNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webp is a whole 1 × 1 lossless WebP: Sniff reads its header's size.
var webp = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

// TestSniffTakesImagesByContent: PNG, JPEG, GIF and WebP are taken by
// their bytes whatever their name; HTML, SVG, text and a PNG's name on
// other bytes are not.
func TestSniffTakesImagesByContent(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	var j, g bytes.Buffer
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	for want, data := range map[string][]byte{".png": PNG(t), ".jpg": j.Bytes(), ".gif": g.Bytes(), ".webp": webp} {
		if _, ext, err := media.Sniff(data); err != nil || ext != want {
			t.Errorf("%s: %q %v", want, ext, err)
		}
	}
	for name, data := range map[string]string{"html": "<html><script>alert(1)</script>", "svg": `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`,
		"text": "just words", "pdf": "%PDF-1.4 ..."} {
		if _, _, err := media.Sniff([]byte(data)); !errors.Is(err, media.ErrNotImage) {
			t.Errorf("%s taken as an image: %v", name, err)
		}
	}
}

// TestUploadToDir: an image is stored under its hash with its
// extension, once however often it is uploaded; a bad upload stores
// nothing.
func TestUploadToDir(t *testing.T) {
	dir := &media.Dir{Path: filepath.Join(t.TempDir(), "media"), Base: "https://news.example.com/"}
	svc := media.New(dir)
	ctx := context.Background()
	data := PNG(t)
	m, err := svc.Upload(ctx, data, " A [red] dot\n")
	if err != nil {
		t.Fatal(err)
	}
	if !media.ValidName(m.Name) || !strings.HasSuffix(m.Name, ".png") || m.URL != "https://news.example.com/media/"+m.Name ||
		m.Markdown != "![A red dot]("+m.URL+")" || m.ContentType != "image/png" || m.Bytes != len(data) {
		t.Fatalf("uploaded: %+v", m)
	}
	if again, err := svc.Upload(ctx, data, ""); err != nil || again.Name != m.Name || again.Markdown != "![image]("+m.URL+")" {
		t.Fatalf("again: %+v %v", again, err)
	}
	f, err := dir.Open(m.Name)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	_ = f.Close() // read-only
	if !bytes.Equal(got, data) {
		t.Fatal("the stored file differs")
	}
	for name, bad := range map[string]struct {
		data []byte
		err  error
	}{"empty": {nil, media.ErrEmpty}, "text": {[]byte("hello"), media.ErrNotImage}, "too large": {append(PNG(t), make([]byte, media.MaxBytes)...), media.ErrTooLarge}} {
		if _, err := svc.Upload(ctx, bad.data, ""); !errors.Is(err, bad.err) {
			t.Errorf("%s: %v, want %v", name, err, bad.err)
		}
	}
	if entries, _ := os.ReadDir(dir.Path); len(entries) != 1 {
		t.Fatalf("the folder holds %d files, want the one image", len(entries))
	}
	if _, err := dir.Open("../media.go"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a name not made by Upload: %v", err)
	}
}

// TestUploadToS3: against gofakes3 (speaking S3 as the SDK does), an
// image is stored as an object with its sniffed type and a year's cache,
// at the public URL.
func TestUploadToS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("letters"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	st, err := media.NewS3(media.S3Config{Endpoint: srv.URL, Bucket: "letters", AccessKey: "key", SecretKey: "secret", Region: "us-east-1",
		PublicURL: "https://cdn.example.com/letters/"})
	if err != nil {
		t.Fatal(err)
	}
	data := PNG(t)
	m, err := media.New(st).Upload(context.Background(), data, "dot")
	if err != nil {
		t.Fatal(err)
	}
	if m.URL != "https://cdn.example.com/letters/"+m.Name {
		t.Fatalf("url %q", m.URL)
	}
	resp, err := http.Get(srv.URL + "/letters/" + m.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read-only
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(got, data) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("the object: %d %q %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
	}
	if _, err := media.NewS3(media.S3Config{Endpoint: "ftp://x", Bucket: "b", PublicURL: "https://x"}); err == nil {
		t.Fatal("an ftp endpoint was taken")
	}
}

// TestSniffBoundsDeclaredSize: an image whose header declares more than
// MaxSide a side or MaxPixels in all is refused before anything decodes
// it (a 3.5 MB PNG can declare 30,000 × 30,000: the probe's finding), and
// one whose header does not parse is not an image.
func TestSniffBoundsDeclaredSize(t *testing.T) {
	// A PNG's signature and header chunk alone: what DecodeConfig reads,
	// declaring any size without the pixels.
	header := func(w, h int) []byte {
		chunk := binary.BigEndian.AppendUint32([]byte("IHDR"), uint32(w))
		chunk = binary.BigEndian.AppendUint32(chunk, uint32(h))
		chunk = append(chunk, 8, 0, 0, 0, 0) // 8-bit grey, no interlace
		b := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
		b = append(b, chunk...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
	}
	if _, _, err := media.Sniff(header(600, 400)); err != nil {
		t.Fatalf("a 600 × 400 PNG: %v", err)
	}
	for _, wh := range [][2]int{{media.MaxSide + 1, 1}, {1, media.MaxSide + 1}, {8000, 8000}, {30000, 30000}} {
		if _, _, err := media.Sniff(header(wh[0], wh[1])); !errors.Is(err, media.ErrTooManyPixels) {
			t.Errorf("%d × %d: %v, want ErrTooManyPixels", wh[0], wh[1], err)
		}
	}
	broken := header(10, 10)[:20] // the signature, then a cut header
	if _, _, err := media.Sniff(broken); !errors.Is(err, media.ErrNotImage) {
		t.Errorf("a cut PNG header: %v, want ErrNotImage", err)
	}
}
