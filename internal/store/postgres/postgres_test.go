package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
	"github.com/latch-authz/latch/internal/store/storetest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		// Every store was closed: no pool, health check or collector goroutine may remain.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newDatabase returns the URI of a fresh, migrated database.
func newDatabase(t *testing.T) string {
	t.Helper()
	return pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
}

// open opens a store on a fresh database, closed when t ends.
func open(t *testing.T, opts postgres.Options) (*postgres.Store, string) {
	t.Helper()
	uri := newDatabase(t)
	if opts.GCInterval == 0 {
		opts.GCInterval = -1
	}
	s, err := postgres.Open(context.Background(), uri, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, uri
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := open(t, postgres.Options{})
		return s
	})
}
