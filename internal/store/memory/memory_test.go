package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New(memory.Options{})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
