package issues_test

import (
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// fixedSizer measures every issue's HTML as n bytes.
type fixedSizer int

func (n fixedSizer) HTMLSize(context.Context, store.Issue) (int, error) { return int(n), nil }

// TestNewWiresItsParts: the one constructor keeps the size guard and the
// bulk-mail gate it is given, and leaves the guard off without a sizer
// (no templates), as every door relies on.
func TestNewWiresItsParts(t *testing.T) {
	gate := errors.New("no postal address")
	svc := issues.New(issues.Parts{Sizer: fixedSizer(123), BulkReady: func(context.Context) error { return gate }})
	if svc.HTMLSize == nil {
		t.Fatal("HTMLSize: nil, want the sizer's")
	}
	if n, err := svc.HTMLSize(context.Background(), store.Issue{}); n != 123 || err != nil {
		t.Errorf("HTMLSize = %d, %v; want 123, nil", n, err)
	}
	if svc.BulkReady == nil || !errors.Is(svc.BulkReady(context.Background()), gate) {
		t.Error("BulkReady: not the gate given")
	}
	if bare := issues.New(issues.Parts{}); bare.HTMLSize != nil || bare.BulkReady != nil {
		t.Error("without a sizer or a gate: want neither set")
	}
}
