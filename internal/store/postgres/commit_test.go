package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestCommitOutcome: a write whose COMMIT lost its connection asks the server what
// became of its transaction. Committed, the write succeeded; aborted, nothing was
// written and the outage is reported; with the server gone for good, the outcome is
// unknown: UNAVAILABLE for a write that may be repeated, ErrCommitUnknown otherwise.
func TestCommitOutcome(t *testing.T) {
	pgtest.Get(t)              // skips when PostgreSQL is not installed
	srv, err := pgtest.Start() // a server of its own: this test stops it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	uri := srv.NewDatabase(t, "latch_migrated", postgres.Migrate)
	ctx := context.Background()
	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lost := fmt.Errorf("postgres: committing: %w: conn closed", store.ErrUnavailable)

	r, err := rel.Parse("doc:a#viewer@user:x")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: r}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var committed string
	if err := postgres.QueryRowForTest(s, ctx, "SELECT xid::text FROM latch_transactions WHERE rev = "+strconv.FormatInt(int64(rev), 10), &committed); err != nil {
		t.Fatal(err)
	}
	aborted, err := postgres.AbortedXIDForTest(s, ctx)
	if err != nil {
		t.Fatal(err)
	}
	xid := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if got, err := postgres.CommitOutcomeForTest(s, rev, xid(committed), false, 5*time.Second, lost); err != nil || got != rev {
		t.Errorf("committed transaction: %v %v, want revision %v", got, err, rev)
	}
	if _, err := postgres.CommitOutcomeForTest(s, rev+1, xid(aborted), false, 5*time.Second, lost); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) {
		t.Errorf("aborted transaction: %v, want the outage (nothing written)", err)
	}
	refused := errors.New("ERROR: could not serialize access (SQLSTATE 40001)")
	if _, err := postgres.CommitOutcomeForTest(s, rev+1, xid(aborted), false, 5*time.Second, refused); err != refused {
		t.Errorf("a commit the server refused: %v, want its own error", err)
	}

	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.CommitOutcomeForTest(s, rev, xid(committed), false, time.Second, lost); !errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("server gone, a create: %v, want ErrCommitUnknown", err)
	}
	if _, err := postgres.CommitOutcomeForTest(s, rev, xid(committed), true, time.Second, lost); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) {
		t.Errorf("server gone, a touch: %v, want ErrUnavailable", err)
	}
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
}
