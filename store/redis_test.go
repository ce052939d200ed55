package store_test

import (
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

func TestRedisContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store {
			c, _ := redistest.New(t, redistest.DBStore)
			return store.NewRedis(c)
		},
	})
}
