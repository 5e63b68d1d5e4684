package pebble

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTest opens a store in a fresh directory, closed when the test ends.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openDir(t, t.TempDir(), opts)
}

// openDir opens the store in dir, closed when the test ends.
func openDir(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, Options{})
	})
}
