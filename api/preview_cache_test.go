package api

import (
	"context"
	"testing"

	"github.com/newsletter/newsletter/store"
)

type countingRenderer struct {
	fakeIssueMail
	previews int
}

func (c *countingRenderer) Preview(ctx context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	c.previews++
	return c.fakeIssueMail.Preview(ctx, is, topic, format)
}

// TestPreviewCache: the same content, topic and format is rendered once;
// a new version, another topic or format renders again.
func TestPreviewCache(t *testing.T) {
	r := &countingRenderer{}
	c := CachePreviews(r, nil)
	ctx := context.Background()
	is := store.Issue{ID: 1, Slug: "march", IssueContent: store.IssueContent{Subject: "S", Body: "one", Topics: []string{"digest", "updates"}}}
	for range 3 {
		if _, body, err := c.Preview(ctx, is, "digest", "html"); err != nil || string(body) != "digest:one" {
			t.Fatalf("preview: %q %v", body, err)
		}
	}
	if r.previews != 1 {
		t.Fatalf("rendered %d times, want once", r.previews)
	}
	is.Body = "two"
	_, _, _ = c.Preview(ctx, is, "digest", "html")
	_, _, _ = c.Preview(ctx, is, "updates", "html")
	_, _, _ = c.Preview(ctx, is, "updates", "text")
	if r.previews != 4 {
		t.Fatalf("rendered %d times, want 4 (a new body, another topic, another format)", r.previews)
	}
	if CachePreviews(nil, nil) != nil {
		t.Fatal("a nil renderer wrapped is not nil")
	}
}
