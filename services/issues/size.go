package issues

import (
	"context"
	"fmt"

	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// Gmail's clip and the size guard's thresholds are the pre-send
// checks' (presend.ClipBytes, presend.WarnBytes).
const (
	// ClipBytes is the HTML part over which a send is refused unless
	// forced.
	ClipBytes = presend.ClipBytes
	// WarnBytes is the HTML part over which the preview and the send
	// step warn.
	WarnBytes = presend.WarnBytes
)

// HTMLSizer measures the HTML part a reader of is gets, as sent (links
// counted, a reader's token in them).
type HTMLSizer func(ctx context.Context, is store.Issue) (int, error)

// ClippedError is a send whose HTML part is over ClipBytes (409), refused
// unless forced.
type ClippedError struct{ Bytes int }

func (e *ClippedError) Error() string {
	return fmt.Sprintf("the issue's HTML part is %s, over the %s at which Gmail clips a mail (its readers would lose the end, the unsubscribe link with it); shorten it, or send with force to send it anyway",
		KB(e.Bytes), KB(ClipBytes))
}

// KB is n bytes as a publisher reads it: "93.4 KB" (thousands of
// bytes, as the limits are counted).
func KB(n int) string { return presend.KB(n) }

// SizeWarning is what to tell a publisher of an HTML part of n bytes:
// "" when it is well under the clip.
func SizeWarning(n int) string {
	switch {
	case n > ClipBytes:
		return fmt.Sprintf("The HTML part is %s: over %s, Gmail clips it and its readers lose the end, the unsubscribe link with it. Shorten the issue; a send is refused unless forced.", KB(n), KB(ClipBytes))
	case n > WarnBytes:
		return fmt.Sprintf("The HTML part is %s: close to the %s at which Gmail clips a mail. Consider shortening it.", KB(n), KB(ClipBytes))
	}
	return ""
}

// SendReport is what a send did: the audience it counted, the size of its
// HTML part (0: not measured), and the safeguards force overrode ("no
// readers", "size").
type SendReport struct {
	Audience   int64    `json:"audience"`
	HTMLBytes  int      `json:"html_bytes,omitempty"`
	Overridden []string `json:"overridden,omitempty"`
}

// Override names: the zero-reader refusal (ErrNoReaders), the size
// refusal (*ClippedError) and the pre-send checks' (*ChecksError).
const (
	OverrideNoReaders = "no readers"
	OverrideSize      = "size"
	OverrideChecks    = "checks"
)

// checkSize measures is (when the service has a sizer) and refuses it
// over ClipBytes unless forced; it adds to rep what it found.
func (s *Service) checkSize(ctx context.Context, is store.Issue, force bool, rep *SendReport) error {
	if s.HTMLSize == nil {
		return nil
	}
	n, err := s.HTMLSize(ctx, is)
	if err != nil {
		return fmt.Errorf("measure the issue's HTML part: %w", err)
	}
	rep.HTMLBytes = n
	if n > ClipBytes {
		if !force {
			return &ClippedError{Bytes: n}
		}
		rep.Overridden = append(rep.Overridden, OverrideSize)
	}
	return nil
}
