package issues

import (
	"context"
	"errors"
	"testing"
)

// TestSearchesAtOnceBounded: with SearchesAtOnce searches running in the
// process, one more is ErrSearchBusy at once, reading nothing; once one
// ends, a search runs again.
func TestSearchesAtOnceBounded(t *testing.T) {
	for range SearchesAtOnce {
		searching <- struct{}{}
	}
	s := &Service{} // no store: a search that ran would fail on it
	if _, err := s.Search(context.Background(), "", []string{"x"}, 10); !errors.Is(err, ErrSearchBusy) {
		<-searching
		t.Fatalf("a search beside %d running: %v, want ErrSearchBusy", SearchesAtOnce, err)
	}
	for range SearchesAtOnce {
		<-searching
	}
}
