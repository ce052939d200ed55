// Package media keeps the images a publisher uploads into issues: checked
// to be an image by their content (never by what the client says), named
// by a hash of it, and stored in a local folder by default or in an
// S3-compatible bucket when one is configured (API replicas share
// nothing else, so a folder serves one replica alone). The API and the
// console upload through one Service.
package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // the types taken register their headers' readers
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"regexp"
	"strings"

	_ "golang.org/x/image/webp"
)

// The bounds of an upload (docs/security.md lists them).
const (
	// MaxBytes is the largest image: 5 MiB.
	MaxBytes = 5 << 20
	// MaxInFlight is how many uploads one process stores at once; one
	// more is refused (ErrBusy) rather than queued, so uploads cannot pile
	// up memory (each holds its image, at most MaxBytes).
	MaxInFlight = 4
	// MaxSide and MaxPixels bound an image's declared size: a few MB of
	// PNG can declare 30,000 × 30,000 pixels, gigabytes for whoever
	// decodes it (a reader's mail client, the archive's visitors). A
	// newsletter's images are hundreds of pixels wide.
	MaxSide   = 10_000
	MaxPixels = 50_000_000
)

// Errors of an upload; nothing is stored with any of them.
var (
	ErrEmpty    = errors.New("the upload is empty")
	ErrTooLarge = fmt.Errorf("an image is at most %d MiB", MaxBytes>>20)
	ErrNotImage = errors.New("not an image: PNG, JPEG, GIF or WebP, judged by the content")
	ErrBusy     = fmt.Errorf("%d uploads are being stored already; try again in a moment", MaxInFlight)
	// ErrTooManyPixels: the image declares a size past MaxSide or
	// MaxPixels (the error names it).
	ErrTooManyPixels = fmt.Errorf("an image is at most %d pixels a side and %d megapixels", MaxSide, MaxPixels/1_000_000)
)

// types are the images taken, by the type sniffed from their content,
// with the extension their name gets.
var types = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// ContentType is the type of a stored name, from its extension (which
// Sniff chose): what the media route answers with, never the client's.
func ContentType(name string) string {
	for ct, ext := range types {
		if strings.HasSuffix(name, ext) {
			return ct
		}
	}
	return ""
}

// namePattern is every stored name: a SHA-256 in hex and an extension.
var namePattern = regexp.MustCompile(`^[0-9a-f]{64}\.(png|jpg|gif|webp)$`)

// ValidName tells whether name is one Upload makes (and so safe as a
// file or object name).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Sniff is data's image type and extension, judged by its first bytes
// (http.DetectContentType): ErrNotImage for anything else (SVG too: it
// can carry script).
//
// It also reads the size the image declares (its header only, nothing
// decoded): one that does not parse is ErrNotImage, one past MaxSide or
// MaxPixels is ErrTooManyPixels.
func Sniff(data []byte) (contentType, ext string, err error) {
	ct := http.DetectContentType(data)
	ext, ok := types[ct]
	if !ok {
		return "", "", ErrNotImage
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", "", fmt.Errorf("%w (its header does not parse: %v)", ErrNotImage, err)
	}
	if cfg.Width > MaxSide || cfg.Height > MaxSide || cfg.Width*cfg.Height > MaxPixels {
		return "", "", fmt.Errorf("%w: this one is %d × %d", ErrTooManyPixels, cfg.Width, cfg.Height)
	}
	return ct, ext, nil
}

// Store keeps images by name.
type Store interface {
	// Put stores data under name (an image of contentType); storing a
	// name again is harmless (the same name is the same content).
	Put(ctx context.Context, name, contentType string, data []byte) error
	// URL is where readers fetch name.
	URL(name string) string
}

// Media is one stored image.
type Media struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	Bytes       int    `json:"bytes"`
	// Markdown is the image as an issue's body writes it.
	Markdown string `json:"markdown"`
}

// Service checks and stores uploads. Make it with New.
type Service struct {
	store    Store
	inFlight chan struct{}
}

// New is a Service storing into st.
func New(st Store) *Service {
	return &Service{store: st, inFlight: make(chan struct{}, MaxInFlight)}
}

// Local is the folder the service stores into, or nil when it stores
// elsewhere (a bucket serves its own images).
func (s *Service) Local() *Dir {
	d, _ := s.store.(*Dir)
	return d
}

// Upload checks data (size, type by content) and stores it under the
// hash of its content: ErrEmpty, ErrTooLarge, ErrNotImage, ErrBusy, or
// the store's error; nothing stored then. alt is the Markdown's alt text
// (its brackets and line breaks dropped).
func (s *Service) Upload(ctx context.Context, data []byte, alt string) (Media, error) {
	switch {
	case len(data) == 0:
		return Media{}, ErrEmpty
	case len(data) > MaxBytes:
		return Media{}, ErrTooLarge
	}
	ct, ext, err := Sniff(data)
	if err != nil {
		return Media{}, err
	}
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
	default:
		return Media{}, ErrBusy
	}
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:]) + ext
	if err := s.store.Put(ctx, name, ct, data); err != nil {
		return Media{}, fmt.Errorf("store the image: %w", err)
	}
	url := s.store.URL(name)
	alt = strings.Map(func(r rune) rune {
		if r == '[' || r == ']' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, strings.TrimSpace(alt))
	if alt == "" {
		alt = "image"
	}
	return Media{Name: name, URL: url, ContentType: ct, Bytes: len(data), Markdown: "![" + alt + "](" + url + ")"}, nil
}
