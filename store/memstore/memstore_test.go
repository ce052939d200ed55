package memstore

import (
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(*testing.T) store.Store { return New() },
		SetClock: func(s store.Store, now func() time.Time) {
			s.(*Memory).SetClock(now)
		},
	})
}
