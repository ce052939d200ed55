package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/newsletter/newsletter/services/issues"

	"github.com/newsletter/newsletter/store"
)

// maxCachedPreviews bounds the preview cache: a publisher looks at a few
// issues, each in a few topics and formats.
const maxCachedPreviews = 64

// CachePreviews wraps r so that a preview of the same content (an issue's
// saved version, or the editor's unsaved text) as the same topic and
// format is rendered once: rendering Markdown costs CPU that a page
// reloaded, or a script asking again, should not spend each time. Test
// sends pass through. A nil r stays nil. generation (nil: none) names
// what else a preview is made of, the templates and settings in effect:
// a change to them is a new key.
func CachePreviews(r issues.Renderer, generation func() string) issues.Renderer {
	if r == nil {
		return nil
	}
	if generation == nil {
		generation = func() string { return "" }
	}
	return &previewCache{Renderer: r, generation: generation, entries: map[[32]byte]cachedPreview{}}
}

type previewCache struct {
	issues.Renderer
	generation func() string
	mu         sync.Mutex
	entries    map[[32]byte]cachedPreview
}

type cachedPreview struct {
	contentType string
	body        []byte
}

// Preview implements IssueRenderer. The key is everything of the issue a
// preview shows: its id, slug and content, the topic and the format, and
// the templates and settings in effect.
func (c *previewCache) Preview(ctx context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	if format == "eml" {
		// The whole message carries a fresh Date, Message-ID and DKIM
		// timestamp each time, as a sent one does: not cached.
		return c.Renderer.Preview(ctx, is, topic, format)
	}
	raw, err := json.Marshal(struct {
		ID            int64
		Slug          string
		Content       store.IssueContent
		Topic, Format string
		Generation    string
	}{is.ID, is.Slug, is.IssueContent, topic, format, c.generation()})
	if err != nil {
		return "", nil, err
	}
	key := sha256.Sum256(raw)
	c.mu.Lock()
	hit, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return hit.contentType, hit.body, nil
	}
	ct, body, err := c.Renderer.Preview(ctx, is, topic, format)
	if err != nil {
		return ct, body, err
	}
	c.mu.Lock()
	if len(c.entries) >= maxCachedPreviews {
		clear(c.entries)
	}
	c.entries[key] = cachedPreview{ct, body}
	c.mu.Unlock()
	return ct, body, nil
}

// BodyHTML implements issues.BodyRenderer when the wrapped renderer does
// ("" otherwise: the checks then read the preview's links). Not cached:
// the link checker caches what it asks, and the body renders fast.
func (c *previewCache) BodyHTML(ctx context.Context, is store.Issue) (string, error) {
	if br, ok := c.Renderer.(issues.BodyRenderer); ok {
		return br.BodyHTML(ctx, is)
	}
	return "", nil
}
